"""An Inspect `.eval` zstd bomb imported: peak RSS (issue 43; the target is under 300 MB).

    .venv/bin/python bench/bomb_bench.py            # 1.5 GiB of spaces in one member, its directory saying 100 bytes
    .venv/bin/python bench/bomb_bench.py --quick    # 64 MiB of spaces, a smoke run: exits 0 on success

The bomb (tests/bombs.py, written as a stream: about 50 kB on disk) holds a header, one good
sample and the lying member. The import (trials.imports.service.run_import) runs in a fresh
child process on an empty SQLite database, so the peak RSS is its own; the child checks that
the good sample is a trial and the bomb a problem naming its member. `honest` is the same
member claiming its true size (streamed, stopped by the ratio limit).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from database import setup_django, timed_import  # bench/: this folder is on sys.path when run as a script
from timing import peak_rss_kb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.bombs import lying_eval

REPO = Path(__file__).resolve().parents[1]
MiB = 1024 * 1024
TARGET_MB = 300


def child_import(log: Path, data_dir: Path) -> dict:
    setup_django(data_dir)
    from trials.models import Trial

    imp, seconds = timed_import(log)
    assert imp.status == "done", imp.problems
    assert list(Trial.objects.values_list("name", flat=True)) == ["good_epoch_1"]
    [problem] = [p for p in imp.problems if p["severity"] == "error"]
    assert problem["json_path"] == "samples/bomb_epoch_1.json", problem
    return {"seconds": seconds, "problem": problem["message"]}


def measure(tmp: Path, name: str, spaces: int, claimed: int | None) -> dict:
    log = lying_eval(tmp / f"{name}.eval", spaces, claimed)
    data_dir = tmp / f"db-{name}"
    data_dir.mkdir()
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(log), str(data_dir)],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "bomb": name,
        "expands_to_MiB": spaces // MiB,
        "claims": claimed if claimed is not None else "its size",
        "upload_kB": round(log.stat().st_size / 1000, 1),
        "import_s": round(result["seconds"], 2),
        "peak_rss_MB": round(result["peak_rss_kb"] / 1024),
        "problem": result["problem"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("LOG", "DATA_DIR"))
    args = parser.parse_args()
    if args.child:
        result = child_import(Path(args.child[0]), Path(args.child[1]))
        result["peak_rss_kb"] = peak_rss_kb()
        print(json.dumps(result))
        return
    spaces = 64 * MiB if args.quick else 1536 * MiB
    with tempfile.TemporaryDirectory(prefix="bomb-bench-") as tmp:
        for name, claimed in (("lying", 100), ("honest", None)):
            row = measure(Path(tmp), name, spaces, claimed)
            print(json.dumps(row), flush=True)
            assert row["peak_rss_MB"] < TARGET_MB, f"peak RSS {row['peak_rss_MB']} MB: the target is {TARGET_MB} MB"


if __name__ == "__main__":
    main()
