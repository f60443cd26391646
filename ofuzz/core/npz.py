"""Reading and writing .npz files of named arrays: the one format models' inputs and engines' outputs travel in.

Its own small module so the engine layer, the repro export and the generator share it without importing each other.
"""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np


def load_npz(path: Path) -> dict[str, np.ndarray]:
    """All arrays of an .npz, read now (the file is closed on return)."""
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An .npz with fixed zip timestamps, so equal inputs give equal bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            arr_buf = io.BytesIO()
            np.lib.format.write_array(arr_buf, np.asarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            zf.writestr(info, arr_buf.getvalue())
    return buf.getvalue()
