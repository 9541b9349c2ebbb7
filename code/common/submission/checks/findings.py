"""What every pre-flight check shares: the list of findings, and reading the files it judges."""
from __future__ import annotations

from pathlib import Path

from code.common import fileio, rounds
from code.common.compliance.mlperf_log import DetailLog
from code.common.errors import HarnessError
from code.common.results import accuracy_text as acc_text
from code.common.results.selection import test_only


class Findings:
    def __init__(self, base: Path):
        self.base = base
        self.items: list[tuple[str, str, str]] = []
        self.unreadable: list[str] = []     # files of the wrong shape, on which the official checker would crash

    def _rel(self, p) -> str:
        try:
            return str(Path(p).relative_to(self.base))
        except ValueError:
            return str(p)

    def error(self, where, msg: str) -> None:
        self.items.append(("ERROR", self._rel(where), msg))

    def warn(self, where, msg: str) -> None:
        self.items.append(("WARN", self._rel(where), msg))

    def reject(self, where, e: HarnessError) -> None:
        """A file that cannot be judged (not JSON, the wrong type, not text): the error's cause as one finding,
        shown relative to the tree like every other."""
        cause = e.cause
        if cause.startswith(str(where)):
            cause = cause[len(str(where)):].lstrip(":")
            cause = f"line {cause.strip()}" if cause[:1].isdigit() else cause.strip()
        self.error(where, f"{cause} (fix: {e.fix})" if e.fix else cause)
        self.unreadable.append(self._rel(where))

    @property
    def errors(self) -> list[tuple[str, str, str]]:
        return [i for i in self.items if i[0] == "ERROR"]

    def lines(self) -> list[str]:
        return [f"{lvl} {where}: {msg}" for lvl, where, msg in self.items]


def require(f: Findings, path: Path, missing: str = "missing") -> bool:
    """Is ``path`` a file? Reported as ``missing`` when not."""
    if path.is_file():
        return True
    f.error(path, missing)
    return False


def read_log(f: Findings, path: Path) -> DetailLog | None:
    """The LoadGen detail log at ``path``; None (reported) when missing or unreadable."""
    if not require(f, path):
        return None
    try:
        return DetailLog(path)
    except OSError as e:
        f.error(path, f"unreadable: {e}")
        return None
    except HarnessError as e:          # a value of the wrong type for its key
        f.reject(path, e)
        return None


def read_text(f: Findings, path: Path) -> str | None:
    """An accuracy.txt-like text file; None (reported) when it is binary or unreadable."""
    try:
        return acc_text.read(path)
    except HarnessError as e:
        f.reject(path, e)
        return None


RESTAGE = "rerun make update_results, then make export_submission"


def read_json(f: Findings, path: Path, missing: str = "missing", fix: str = RESTAGE) -> dict | None:
    """The JSON object in ``path`` (fileio.read_json); None (reported in one line, with ``fix``) when missing, not
    JSON or not an object."""
    if not require(f, path, missing):
        return None
    try:
        return fileio.read_json(path, fix)
    except HarnessError as e:
        f.reject(path, e)
        return None


def log_basics(f: Findings, log: DetailLog, rnd: rounds.Round, what: str) -> None:
    """What every LoadGen log must show: no error lines, and the round's seeds."""
    for e in log.errors():
        f.error(log.path, f"LoadGen error in {what} log: {e}")
    for k, want in rnd.seeds.items():
        got = log.get(f"effective_{k}")
        if got != want:
            f.error(log.path, f"{k} is {got}, the {rnd.version} value is {want} (LoadGen's compiled-in mlperf.conf "
                              "was overridden or another LoadGen was used)")


def run_record(f: Findings, run_dir: Path) -> None:
    """A run's own record where the tree still holds it (a staged tree; exports leave metadata.json out): a
    run made with test-only control values can never be a submission result."""
    md = run_dir / "metadata.json"
    meta = read_json(f, md) if md.is_file() else None
    why = test_only(meta) if isinstance(meta, dict) else None
    if why:
        f.error(md, why)
