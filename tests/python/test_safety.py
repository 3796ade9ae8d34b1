"""Values into columns: a value the column's dtype represents exactly goes in
whatever its Python or NumPy type; anything else raises InvalidArgumentError
naming the table, the column, the value and the dtype, and nothing is stored."""

import ctypes
import math

import numpy as np
import pytest

import replaydb

INTS = {"u8": (0, 2**8 - 1), "i8": (-2**7, 2**7 - 1), "i16": (-2**15, 2**15 - 1),
        "i32": (-2**31, 2**31 - 1), "i64": (-2**63, 2**63 - 1)}
NUMPY = {"bool": np.bool_, "u8": np.uint8, "i8": np.int8, "i16": np.int16, "i32": np.int32,
         "i64": np.int64, "f16": np.float16, "f32": np.float32, "f64": np.float64,
         "bf16": np.uint16}
FLOATS = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
ALL = ["bool", *INTS, *FLOATS, "bf16"]


def _table(db):
    return db.create_table("safe", {d: d for d in ALL}, capacity_steps=4096)


def _zero_step():
    return {d: 0 for d in ALL}


def _read(table, writer, column):
    """The column's value of the writer's latest step, as stored (bf16 as its bits)."""
    key = (writer.trajectory_id << 24) | (writer.num_steps - 1)
    arr = table.lookup(np.array([key], np.uint64))[column]
    raw = ctypes.string_at(arr.data_ptr, arr.nbytes)
    return np.frombuffer(raw, NUMPY[column])[0].item()


def _accepted(table, writer, column, value, expected):
    step = _zero_step()
    step[column] = value
    writer.append(step)
    got = _read(table, writer, column)
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(got), (column, value, got)
    else:
        assert got == expected and type(got) is type(expected), (column, value, got)


def _refused(table, writer, column, value, shown):
    before = writer.num_steps
    step = _zero_step()
    step[column] = value
    with pytest.raises(replaydb.InvalidArgumentError) as e:
        writer.append(step)
    message = str(e.value)
    assert f"table 'safe' column '{column}' is {column}" in message, message
    assert f"value {shown}" in message and f"not one that {column} represents exactly" in message
    assert writer.num_steps == before, "nothing stored"


@pytest.mark.parametrize("column", list(INTS))
def test_integer_columns_take_every_exact_value_and_refuse_the_rest(db_path, rng, column):
    lo, hi = INTS[column]
    np_type = NUMPY[column]
    inside = int(rng.integers(lo, hi, endpoint=True, dtype=np_type))
    with replaydb.open(db_path) as db:
        table = _table(db)
        w = table.writer()
        for v in (lo, hi, inside):
            _accepted(table, w, column, v, v)  # a Python int
            _accepted(table, w, column, np_type(v), v)  # a NumPy scalar of the column's type
            _accepted(table, w, column, np.int64(v), v)  # a wider NumPy scalar
            if abs(v) <= 2**53:
                _accepted(table, w, column, float(v), v)  # an integral float
                _accepted(table, w, column, np.float64(v), v)
        _accepted(table, w, column, True, 1)
        for bad in (lo - 1, hi + 1, 2**70, -2**70):
            _refused(table, w, column, bad, str(bad))
        _refused(table, w, column, 1.5, "1.5")
        _refused(table, w, column, np.uint64(2**64 - 1), str(2**64 - 1))
        _refused(table, w, column, float("nan"), "nan")
        _refused(table, w, column, float("inf"), "inf")
        _refused(table, w, column, np.float64(2.5), "2.5")
        _refused(table, w, column, "3", "'3'")


@pytest.mark.parametrize("column", list(FLOATS))
def test_float_columns_take_values_they_hold_exactly_and_refuse_rounding(db_path, rng, column):
    t = FLOATS[column]
    info = np.finfo(t)
    eps = float(info.eps)
    mantissa_bits = info.nmant + 1
    exact_random = float(t(rng.standard_normal()))
    with replaydb.open(db_path) as db:
        table = _table(db)
        w = table.writer()
        for v in (float(info.max), -float(info.max), float(info.smallest_subnormal), -0.0,
                  1.0, exact_random, float("inf"), -float("inf")):
            _accepted(table, w, column, v, v)
            _accepted(table, w, column, np.float64(v), v)
        _accepted(table, w, column, float("nan"), float("nan"))
        _accepted(table, w, column, 2**mantissa_bits, float(2**mantissa_bits))  # an exact int
        if column != "f64":
            between = 1.0 + eps / 2  # halfway to the next value of the column's dtype
            _refused(table, w, column, between, repr(between))
            too_big = float(info.max) * 2
            _refused(table, w, column, too_big, repr(too_big))
        _refused(table, w, column, 2**mantissa_bits + 1, str(2**mantissa_bits + 1))
        _refused(table, w, column, 2**2000, str(2**2000))


def test_bool_and_bfloat16_columns(db_path):
    with replaydb.open(db_path) as db:
        table = _table(db)
        w = table.writer()
        for v, want in ((True, True), (False, False), (1, True), (0, False), (np.bool_(True), True),
                        (1.0, True)):
            _accepted(table, w, "bool", v, want)
        for bad, shown in ((2, "2"), (-1, "-1"), (0.5, "0.5")):
            _refused(table, w, "bool", bad, shown)
        # bfloat16 holds float32 values whose low 16 bits are zero.
        for v, bits in ((1.0, 0x3F80), (-2.5, 0xC020), (float("inf"), 0x7F80), (0.0, 0)):
            _accepted(table, w, "bf16", v, bits)
        _refused(table, w, "bf16", 1.0 + 2**-10, repr(1.0 + 2**-10))


def test_arrays_convert_when_every_element_fits_and_name_the_first_that_does_not(db_path, rng):
    with replaydb.open(db_path) as db:
        table = db.create_table("arr", {"x": ("i32", (5,)), "y": ("f32", (3,))},
                                capacity_steps=1024)
        vw = table.vector_writer(2)
        x = rng.integers(-2**31, 2**31, (2, 5))  # int64 values that fit int32
        y = rng.integers(-2**24, 2**24, (2, 3)).astype(np.float64)  # floats f32 holds
        vw.append({"x": x, "y": y})
        keys = np.array([(vw.trajectory_id(e) << 24) for e in range(2)], np.uint64)
        batch = table.lookup(keys)
        np.testing.assert_array_equal(np.asarray(batch["x"])[:, 0], x)
        np.testing.assert_array_equal(np.asarray(batch["y"])[:, 0], y)
        bad = x.copy()
        bad[1, 3] = 2**31
        with pytest.raises(replaydb.InvalidArgumentError,
                           match=r"table 'arr' column 'x' is i32: value 2147483648 \(element 8\)"):
            vw.append({"x": bad, "y": y})
        assert table.info()["num_steps"] == 2, "nothing of the refused step stored"


def test_keys_are_unsigned_64_bit_integers_whatever_their_type(db_path):
    with replaydb.open(db_path) as db:
        table = db.create_table("k", {"x": "f32"}, capacity_steps=64, selector="prioritized")
        w = table.writer()
        w.append({"x": 1.0})
        key = w.trajectory_id << 24
        for keys in ([key], np.array([key], np.int64), [float(key)], [np.uint64(key)]):
            assert table.update_priorities(keys, [2.0]) == (1, 0)
        assert table.update_priorities([2**64 - 1], [1.0]) == (0, 1)  # fits: no such item
        for bad, shown in ((-1, "-1"), (2**64, str(2**64)), (0.5, "0.5")):
            with pytest.raises(replaydb.InvalidArgumentError,
                               match=f"keys is u64: value {shown} .*is not one"):
                table.update_priorities([bad], [1.0])
