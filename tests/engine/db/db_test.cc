// DB: open, lock, catalog persistence, table lifecycle errors.
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::TempDir;
using ::testing::HasSubstr;

TableSpec FullSpec(const std::string& name) {
  TableSpec spec;
  spec.name = name;
  spec.columns = {{"obs", DType::kU8, {84, 84, 4}}, {"reward", DType::kF32, {}},
                  {"h", DType::kBF16, {2, 3}}};
  spec.capacity_steps = 1000;
  spec.capacity_bytes = 12345;
  spec.block_steps = 16;
  spec.sequence_length = 5;
  spec.padding = Padding::kTail;
  spec.selector = SelectorKind::kLifo;
  spec.max_times_sampled = 7;
  spec.rate_limiter = RateLimiterSpec::SampleToInsertRatio(1.5, 10, 4.0);
  return spec;
}

TEST(DBTest, ReopenKeepsTablesAndSpecs) {
  TempDir dir;
  const TableSpec a = FullSpec("alpha");
  TableSpec b = FullSpec("beta");
  b.selector = SelectorKind::kUniform;
  b.columns = {{"x", DType::kI64, {3}}};
  {
    auto db = testing_util::OpenDB(dir.path());
    ASSERT_TRUE(db);
    ASSERT_TRUE(db->CreateTable(b).ok());
    ASSERT_TRUE(db->CreateTable(a).ok());
    EXPECT_EQ(db->ListTables(), (std::vector<std::string>{"alpha", "beta"}));
  }
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_TRUE(db);
  EXPECT_EQ(db->ListTables(), (std::vector<std::string>{"alpha", "beta"}));
  auto ta = db->GetTable("alpha");
  ASSERT_TRUE(ta.ok());
  EXPECT_EQ((*ta)->spec(), a);
  EXPECT_EQ((*ta)->name(), "alpha");
  auto tb = db->GetTable("beta");
  ASSERT_TRUE(tb.ok());
  EXPECT_EQ((*tb)->spec(), b);
}

TEST(DBTest, SecondReadWriteOpenerIsRefused) {
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_TRUE(db);
  auto second = DB::Open({}, dir.path());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kBusy);
  EXPECT_THAT(second.status().message(), HasSubstr(dir.path() + "/LOCK"));
  EXPECT_THAT(second.status().message(), HasSubstr(std::to_string(getpid())));

  // Another process is refused too.
  const pid_t child = fork();
  if (child == 0) {
    auto other = DB::Open({}, dir.path());
    _exit(!other.ok() && other.status().code() == Status::Code::kBusy ? 0 : 1);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);

  db.reset();  // releases the lock
  EXPECT_TRUE(DB::Open({}, dir.path()).ok());
}

TEST(DBTest, OpenOptions) {
  TempDir dir;
  DBOptions no_create;
  no_create.create_if_missing = false;
  auto missing = DB::Open(no_create, dir.Sub("nodb"));
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("no database at " + dir.Sub("nodb")));

  ASSERT_TRUE(DB::Open({}, dir.Sub("db")).ok());
  DBOptions exclusive;
  exclusive.error_if_exists = true;
  auto exists = DB::Open(exclusive, dir.Sub("db"));
  EXPECT_EQ(exists.status().code(), Status::Code::kAlreadyExists);
  EXPECT_THAT(exists.status().message(), HasSubstr("already exists"));

  auto nested = DB::Open({}, dir.Sub("no/such/parent"));
  EXPECT_EQ(nested.status().code(), Status::Code::kIOError);
  EXPECT_THAT(nested.status().message(), HasSubstr(dir.Sub("no/such/parent")));

  auto empty = DB::Open({}, "");
  EXPECT_THAT(empty.status().message(), HasSubstr("path is empty"));
}

TEST(DBTest, TableLifecycleErrors) {
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->CreateTable(FullSpec("t")).ok());
  auto dup = db->CreateTable(FullSpec("t"));
  EXPECT_EQ(dup.status().code(), Status::Code::kAlreadyExists);
  EXPECT_THAT(dup.status().message(), HasSubstr("table 't' already exists"));

  auto unknown = db->GetTable("nope");
  EXPECT_EQ(unknown.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("no table named 'nope'"));
  Status drop = db->DropTable("nope");
  EXPECT_EQ(drop.code(), Status::Code::kNotFound);
  EXPECT_THAT(drop.message(), HasSubstr("no table named 'nope'"));

  TableSpec bad = FullSpec("bad");
  bad.sequence_length = 0;
  auto invalid = db->CreateTable(bad);
  EXPECT_EQ(invalid.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(db->ListTables(), std::vector<std::string>{"t"});

  ASSERT_OK(db->DropTable("t"));
  EXPECT_TRUE(db->ListTables().empty());
  db.reset();
  db = testing_util::OpenDB(dir.path());
  EXPECT_TRUE(db->ListTables().empty());
  // The name can be used again.
  EXPECT_TRUE(db->CreateTable(FullSpec("t")).ok());
}

TEST(DBTest, SetRateLimiterIsPersisted) {
  TempDir dir;
  const RateLimiterSpec changed = RateLimiterSpec::MinSize(42);
  {
    auto db = testing_util::OpenDB(dir.path());
    auto t = db->CreateTable(FullSpec("t"));
    ASSERT_TRUE(t.ok());
    ASSERT_OK((*t)->SetRateLimiter(changed));
    EXPECT_EQ((*t)->spec().rate_limiter, changed);
    EXPECT_EQ((*t)->Info().rate_limiter.spec, changed);
    RateLimiterSpec bad;
    bad.samples_per_insert = 0;
    Status s = (*t)->SetRateLimiter(bad);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("table 't'"));
    EXPECT_EQ((*t)->spec().rate_limiter, changed);
  }
  auto db = testing_util::OpenDB(dir.path());
  auto t = db->GetTable("t");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->spec().rate_limiter, changed);
}

TEST(DBTest, CorruptCatalogIsReportedWithItsPath) {
  TempDir dir;
  {
    auto db = testing_util::OpenDB(dir.path());
    ASSERT_TRUE(db->CreateTable(FullSpec("t")).ok());
  }
  const std::string catalog = dir.path() + "/CATALOG";
  {
    std::fstream f(catalog, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x5a');
  }
  auto db = DB::Open({}, dir.path());
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), Status::Code::kCorruption);
  EXPECT_THAT(db.status().message(), HasSubstr(catalog));
}

TEST(DBTest, TableHandlesOutliveTheDatabase) {
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  auto t = db->CreateTable(FullSpec("t"));
  ASSERT_TRUE(t.ok());
  std::shared_ptr<Table> table = *t;
  db.reset();
  auto w = table->NewWriter();
  EXPECT_EQ(w.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(w.status().message(), HasSubstr("its database was closed"));
  EXPECT_FALSE(table->SetRateLimiter(RateLimiterSpec::MinSize(2)).ok());
}

}  // namespace
}  // namespace replaydb
