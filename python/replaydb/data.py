"""A PyTorch ``IterableDataset`` over a table, for ``torch.utils.data.DataLoader``.

    dataset = replaydb.data.ReplayDataset(table, batch_size=256, device="cuda")
    for batch in torch.utils.data.DataLoader(dataset, batch_size=None):
        obs = batch["obs"]          # torch tensors, one per field

Each item is one sampled batch as a dict of PyTorch tensors (no copies: the
tensors hold the batch's memory). Use ``batch_size=None`` in the DataLoader:
the table already batches. Sampling runs in the process that iterates: with
``num_workers=0`` (the default, and the right choice on a GPU: draws are
microseconds) it uses ``table``. A worker process (``num_workers > 0``) is a
fork that may not use the parent's handles; give ``path`` and ``table_name``
instead, and each worker opens the database read-only (it then samples the
parent's last checkpoint, peeking: see docs/concepts.md on read-only opens).
Needs PyTorch >= 2.3.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional


def _make_class() -> Any:
    import torch.utils.data

    base = torch.utils.data.IterableDataset

    class ReplayDataset(base):  # type: ignore[misc, valid-type]
        """Endless batches of ``batch_size`` items from ``table`` (or, in
        DataLoader workers, from table ``table_name`` of the database at
        ``path`` opened read-only); ``num_batches`` stops after that many.
        Sample options (``importance_beta``, ``timeout``, ...) pass through."""

        def __init__(self, table: Any = None, batch_size: int = 256, *,
                     device: Any = None, num_batches: Optional[int] = None,
                     path: Optional[str] = None, table_name: Optional[str] = None,
                     **sample_options: Any):
            super().__init__()
            if table is None and (path is None or table_name is None):
                raise ValueError("replaydb: ReplayDataset needs a table, or path and "
                                 "table_name (for DataLoader workers)")
            self.table, self.batch_size, self.device = table, batch_size, device
            self.num_batches, self.path = num_batches, path
            self.table_name = table_name if table_name is not None else table.name
            self.sample_options = sample_options

        def _source(self) -> Any:
            import torch.utils.data

            if torch.utils.data.get_worker_info() is None and self.table is not None:
                return self.table, {}
            if self.path is None:
                raise ValueError("replaydb: ReplayDataset in a DataLoader worker needs path "
                                 "and table_name: a worker process may not use the parent's "
                                 "table handle (give num_workers=0, or path=...)")
            import replaydb

            db = replaydb.open(self.path, read_only=True)
            return db.table(self.table_name), {"peek": True, "_db": db}

        def __iter__(self) -> Iterator[Dict[str, Any]]:
            table, extra = self._source()
            keep = extra.pop("_db", None)  # the worker's own open, for as long as it iterates
            options = dict(self.sample_options, **extra)
            n = 0
            try:
                while self.num_batches is None or n < self.num_batches:
                    yield table.sample(self.batch_size, device=self.device, **options).torch()
                    n += 1
            finally:
                if keep is not None:
                    keep.close()

    return ReplayDataset


def __getattr__(name: str) -> Any:  # PyTorch is imported when the class is first asked for
    if name == "ReplayDataset":
        cls = _make_class()
        globals()["ReplayDataset"] = cls
        return cls
    raise AttributeError(name)
