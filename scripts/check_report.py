"""Open a campaign's report.html in headless Chromium: how long it takes to render, and a screenshot.

    python scripts/check_report.py DIR [--runs 3] [--png report.png]

Prints the page size, the median time Chromium needs to load and screenshot the
report, and the same for an empty page (the browser's own start-up), so the
difference is what the report costs.  Needs Debian's `chromium`
(`apt-get install chromium`); nothing is fetched from the network.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def shot(browser: str, url: str, png: Path) -> float:
    with tempfile.TemporaryDirectory() as profile:
        t0 = time.perf_counter()
        subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", "--window-size=1200,1600", f"--screenshot={png}", url],
                       capture_output=True, timeout=120, check=False)
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("campaign", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--png", type=Path, default=Path(tempfile.gettempdir()) / "ofuzz-report.png")
    a = ap.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("error: chromium not found; install it with: apt-get install chromium")
    report = (a.campaign / "report.html").resolve()
    if not report.is_file():
        sys.exit(f"error: {report} missing; write it with: ofuzz report {a.campaign}")
    empty = Path(tempfile.mkdtemp()) / "empty.html"
    empty.write_text("<!doctype html><title>empty</title>")
    base = [shot(browser, empty.as_uri(), a.png.with_suffix(".empty.png")) for _ in range(a.runs)]
    page = [shot(browser, report.as_uri(), a.png) for _ in range(a.runs)]
    print(f"report: {report} ({report.stat().st_size / 1e6:.2f} MB)")
    print(f"chromium load+screenshot, median of {a.runs}: report {statistics.median(page):.2f} s, empty page {statistics.median(base):.2f} s "
          f"→ the report costs {statistics.median(page) - statistics.median(base):.2f} s")
    print(f"screenshot: {a.png} ({'written' if a.png.is_file() else 'NOT written'})")


if __name__ == "__main__":
    main()
