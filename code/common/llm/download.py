"""Fetching LLM checkpoints and datasets: the MLCommons R2 downloader's protocol in Python, Hugging
Face snapshots pinned to a commit, and copies from a local folder (``--data_dir``).

Everything is staged and renamed into place only once verified, so an interrupted or corrupt
download never appears under its final name; a re-run resumes (R2 files with HTTP Range requests,
Hugging Face files that already verify are not fetched again). Errors are one-line HarnessErrors
naming the cause and the command that fixes it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Sequence

from code.common import fileio
from code.common.errors import HarnessError, MissingDataError, from_os_error

# --- MLCommons R2 ----------------------------------------------------------------------------------
#
# What mlc-r2-downloader.sh (github.com/mlcommons/r2-downloader, main, 2026) does with
# ``<host>/<dir>/<name>.uri``, and what r2_download reproduces:
#   1. GET the .uri file (wget --max-redirect=0): its text is the base URL of the dataset folder,
#      e.g. https://inference.mlcommons-storage.org/gpt-j/checkpoint-final
#   2. GET ``<host>/<dir>/<name>.md5`` (same folder, same name, .md5): md5sum-format lines
#      ``<32 lowercase hex>  <path>``, the path relative to the base URL, optionally with "./".
#   3. GET ``<base URL>/<path>`` for every line into ``<download dir>/<path>`` (wget --continue -x
#      --cut-dirs, i.e. the folder structure below the base URL is kept).
#   4. ``md5sum -c <name>.md5`` in the download dir (the list is copied there).
# Private buckets (e.g. llama2.mlcommons-storage.org, MLCommons members only) sit behind Cloudflare
# Access: the script detects it from a redirect to ``*.cloudflareaccess.com`` / ``/cdn-cgi/access/``
# and logs in through a browser (cloudflared) or a service token (-s, $CF_ACCESS_CLIENT_ID /
# $CF_ACCESS_CLIENT_SECRET). That login is not reproduced here: such a download is done with the
# official script (see run_r2_script), and its result verified with the md5 list it leaves behind.
# The metadata (.uri/.md5) source of truth is github.com/mlcommons/r2-infra (<bucket>/metadata/).

R2_SCRIPT_URL = "https://raw.githubusercontent.com/mlcommons/r2-downloader/refs/heads/main/mlc-r2-downloader.sh"
R2_SCRIPT_ENV = "MLPERF_R2_DOWNLOADER"     # path to a local copy of mlc-r2-downloader.sh (fallback for private buckets)
_MD5_LINE = re.compile(r"^([0-9a-fA-F]{32})[ \t]+\*?(.+)$")
_ACCESS_MARKS = ("cloudflareaccess.com", "/cdn-cgi/access/")


def r2_command(uri_url: str, dest_dir: str | os.PathLike) -> str:
    """The official download command for ``uri_url`` into ``dest_dir``."""
    return f"bash <(curl -s {R2_SCRIPT_URL}) -d {dest_dir} {uri_url}"


def r2_metadata_urls(uri_url: str) -> tuple[str, str]:
    """(``uri_url`` without query/fragment, the URL of its .md5 file list), as the script forms them."""
    parts = urllib.parse.urlsplit(uri_url)
    if parts.scheme not in ("http", "https") or not parts.netloc or not parts.path.endswith(".uri"):
        raise HarnessError(f"not an R2 metadata URL: {uri_url}",
                           "pass the https://<bucket>.mlcommons-storage.org/metadata/<name>.uri URL "
                           "from the benchmark's README")
    base = f"{parts.scheme}://{parts.netloc}{parts.path}"
    return base, base[: -len(".uri")] + ".md5"


def parse_md5_list(text: str, source: str = "the md5 list") -> list[tuple[str, str]]:
    """[(md5, relative path)] from md5sum-format text; a leading "./" is dropped. A line that is not
    ``<md5> <path>``, or a path that is absolute or climbs out with "..", is an error."""
    entries: list[tuple[str, str]] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        m = _MD5_LINE.match(line)
        if m is None:
            raise HarnessError(f"{source}:{n}: not an md5sum line: {line[:80]!r}",
                               "the MLCommons metadata changed or was corrupted in transit; retry, or report it")
        md5, path = m.group(1).lower(), m.group(2)
        while path.startswith("./"):
            path = path[2:]
        if not path or path.startswith("/") or ".." in Path(path).parts:
            raise HarnessError(f"{source}:{n}: unsafe path {path!r}", "report the bad MLCommons metadata file")
        entries.append((md5, path))
    if not entries:
        raise HarnessError(f"{source} lists no files", "retry; if it persists the MLCommons metadata is broken")
    return entries


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):   # like wget --max-redirect=0
        return None


def _access_required(uri_url: str, dest_dir: Path) -> HarnessError:
    return HarnessError(
        f"{uri_url} is behind MLCommons' Cloudflare Access login (a members-only bucket)",
        f"download it with the official script, which logs you in: {r2_command(uri_url, dest_dir)} "
        f"(or set ${R2_SCRIPT_ENV} to a local copy of mlc-r2-downloader.sh to have it run for you), then re-run", 3)


def fetch_text(url: str, timeout: float = 60.0) -> str:
    """GET a small text file (R2 metadata), honouring $MLPERF_DOWNLOAD_MIRROR, following no
    redirect (a redirect from an R2 domain is the Cloudflare Access login). Raises PermissionError
    for a login redirect or HTTP 401/403; other failures raise their urllib exception."""
    src = fileio.mirrored(url)
    opener = urllib.request.build_opener(_NoRedirect)
    req = urllib.request.Request(src, headers={"User-Agent": "mlperf-harness/1.0"})
    try:
        with opener.open(req, timeout=timeout) as r:
            body = r.read()
            final = r.geturl()
    except urllib.error.HTTPError as e:
        loc = e.headers.get("Location", "") if e.headers else ""
        if e.code in (401, 403) or (300 <= e.code < 400 and any(m in loc for m in _ACCESS_MARKS)):
            raise PermissionError(f"HTTP {e.code}") from None
        raise
    text = body.decode("utf-8", "replace")
    if any(m in final for m in _ACCESS_MARKS) or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        raise PermissionError("login page")
    return text


def _fetch_metadata(url: str, uri_url: str, dest_dir: Path) -> str:
    try:
        return fetch_text(url)
    except PermissionError:
        raise _access_required(uri_url, dest_dir) from None
    except urllib.error.HTTPError as e:
        raise HarnessError(f"could not fetch R2 metadata {url}: HTTP {e.code}",
                           f"check the URL; retry later, or download with {r2_command(uri_url, dest_dir)}", 3) from None
    except Exception as e:    # DNS, refused, timeout
        raise HarnessError(f"could not fetch R2 metadata {url}: {type(e).__name__}: {e}".replace("\n", " "),
                           f"check network access to {urllib.parse.urlsplit(url).netloc} "
                           f"(${fileio.MIRROR_ENV} names a mirror), then re-run", 3) from None


def r2_download(uri_url: str, dest_dir: Path, log=print, *, include: Callable[[str], bool] | None = None,
                expect_md5: dict[str, str] | None = None) -> list[Path]:
    """Download an MLCommons R2 dataset/model described by its ``.uri`` metadata URL into
    ``dest_dir``, as mlc-r2-downloader.sh does (see the notes above); returns the files' paths.

    Verified: every file against the md5 the MLCommons ``<name>.md5`` list gives for it (the same
    check as the script's ``md5sum -c``), before it is renamed into place (fileio.download: a file
    already present is reused only if its md5 matches; an interrupted one resumes). With
    ``expect_md5`` ({path: md5}, pinned from github.com/mlcommons/r2-infra) the list fetched must
    also agree with the pins, so a changed upstream file is an error rather than a silent change.
    ``include`` selects which listed paths to fetch (default all). The md5 lines of the files
    fetched are written to ``dest_dir/<name>.md5`` last, as the record of what was verified.

    Not verified (nothing to verify it against): the .uri/.md5 metadata themselves, beyond
    ``expect_md5``. A members-only bucket (Cloudflare Access) cannot be logged into from here: the
    error names the official command; with $MLPERF_R2_DOWNLOADER set to a local copy of the script it
    is run instead (run_r2_script) and its files are then verified against the same md5 list.
    """
    dest_dir = Path(dest_dir)
    uri, md5_url = r2_metadata_urls(uri_url)
    name = Path(urllib.parse.urlsplit(uri).path).name[: -len(".uri")]
    try:
        base = _fetch_metadata(uri, uri_url, dest_dir).strip().rstrip("/")
        md5_text = _fetch_metadata(md5_url, uri_url, dest_dir)
    except HarnessError as e:
        if "Cloudflare Access" in e.cause and os.environ.get(R2_SCRIPT_ENV):
            return run_r2_script(uri_url, dest_dir, log=log, include=include, expect_md5=expect_md5)
        raise
    if not re.match(r"^https?://[^/\s]+/?\S*$", base):
        raise HarnessError(f"{uri} does not hold a base URL (got {base[:80]!r})",
                           f"retry; or download with {r2_command(uri_url, dest_dir)}", 3)
    entries = _select(parse_md5_list(md5_text, md5_url), include, expect_md5, md5_url)
    fix = f"re-run to resume, or download with {r2_command(uri_url, dest_dir)}"
    out = []
    for i, (md5, path) in enumerate(entries, 1):
        # a .uri may name the file itself rather than its folder (llama3-1-405b-dataset-8313.uri)
        url = base if len(entries) == 1 and base.rsplit("/", 1)[-1] == path.rsplit("/", 1)[-1] \
            else f"{base}/{urllib.parse.quote(path, safe='/')}"
        dest = dest_dir / path
        fileio.download(url, dest, md5=md5, fix=fix)
        log(f"[r2] {i}/{len(entries)} {path}: md5 {md5} ok")
        out.append(dest)
    # The record of what was verified, in md5sum -c format (only the files fetched).
    fileio.write_text(dest_dir / f"{name}.md5", "".join(f"{m}  {p}\n" for m, p in entries))
    return out


def _select(entries, include, expect_md5, source) -> list[tuple[str, str]]:
    if include is not None:
        entries = [(m, p) for m, p in entries if include(p)]
    if expect_md5:
        listed = dict((p, m) for m, p in entries)
        for path, want in expect_md5.items():
            if path in listed and listed[path] != want.lower():
                raise HarnessError(f"{source} gives md5 {listed[path]} for {path}, but this harness pins {want}",
                                   "MLCommons changed the file: check the benchmark README and update the pin", 3)
            if path not in listed:
                raise HarnessError(f"{source} no longer lists {path}",
                                   "MLCommons changed the dataset: check the benchmark README and update the pin", 3)
    if not entries:
        raise HarnessError(f"{source}: none of the listed files is wanted", "report it: the file names changed", 3)
    return entries


def verify_md5_list(dest_dir: Path, entries: Sequence[tuple[str, str]], fix: str) -> list[Path]:
    """Check that every (md5, path) of ``entries`` exists under ``dest_dir`` with that md5 (what
    ``md5sum -c`` does); the first missing or mismatching file is a MissingDataError."""
    out = []
    for md5, path in entries:
        p = Path(dest_dir) / path
        if not p.is_file():
            raise MissingDataError(f"{p} is missing", fix)
        got = fileio.md5_file(p)
        if got != md5:
            raise MissingDataError(f"{p}: md5 {got}, the MLCommons list says {md5} (corrupt or partial)", fix)
        out.append(p)
    return out


def run_r2_script(uri_url: str, dest_dir: Path, log=print, *, include: Callable[[str], bool] | None = None,
                  expect_md5: dict[str, str] | None = None, script: str | None = None) -> list[Path]:
    """Fallback: run a local copy of the official mlc-r2-downloader.sh (``script`` or
    $MLPERF_R2_DOWNLOADER; never fetched and piped to bash from here) with ``-d dest_dir``, adding
    ``-s`` when $CF_ACCESS_CLIENT_ID/$CF_ACCESS_CLIENT_SECRET hold a service token; then verify
    the files it wrote against the md5 list it leaves in ``dest_dir`` (the script checks them too)."""
    dest_dir = Path(dest_dir)
    script = script or os.environ.get(R2_SCRIPT_ENV)
    if not script or not Path(script).is_file():
        raise HarnessError(f"${R2_SCRIPT_ENV} does not name a file ({script})",
                           f"curl -o mlc-r2-downloader.sh {R2_SCRIPT_URL}; export {R2_SCRIPT_ENV}=$PWD/mlc-r2-downloader.sh")
    missing = [t for t in ("bash", "wget", "curl", "md5sum") if shutil.which(t) is None]
    if missing:
        raise HarnessError(f"the R2 downloader script needs {', '.join(missing)}, not found on PATH",
                           f"install {' '.join(missing)} (e.g. apt-get install {' '.join(missing)}), then re-run")
    cmd = ["bash", str(script)]
    if os.environ.get("CF_ACCESS_CLIENT_ID") and os.environ.get("CF_ACCESS_CLIENT_SECRET"):
        cmd.append("-s")
    cmd += ["-d", str(dest_dir), uri_url]
    log(f"[r2] running {' '.join(cmd)}")
    dest_dir.mkdir(parents=True, exist_ok=True)
    rc = subprocess.call(cmd)
    if rc != 0:
        raise HarnessError(f"mlc-r2-downloader.sh exited with status {rc}",
                           f"see its output above; re-run to resume ({r2_command(uri_url, dest_dir)})", 3)
    _, md5_url = r2_metadata_urls(uri_url)
    listing = dest_dir / Path(urllib.parse.urlsplit(md5_url).path).name
    if not listing.is_file():
        raise HarnessError(f"mlc-r2-downloader.sh left no {listing.name} in {dest_dir}",
                           f"re-run {r2_command(uri_url, dest_dir)}", 3)
    entries = _select(parse_md5_list(listing.read_text(), str(listing)), include, expect_md5, str(listing))
    return verify_md5_list(dest_dir, entries, f"re-run {r2_command(uri_url, dest_dir)}")


# --- Hugging Face -----------------------------------------------------------------------------------

HF = "https://huggingface.co"


def hf_page(repo_id: str, repo_type: str = "model") -> str:
    return f"{HF}/{repo_id}" if repo_type == "model" else f"{HF}/{repo_type}s/{repo_id}"


def _import_hf():
    try:
        import huggingface_hub
    except ImportError:
        raise HarnessError("huggingface_hub is not installed", "pip install -r requirements.txt") from None
    return huggingface_hub


def hf_error(e: BaseException, repo_id: str, *, repo_type: str = "model", token_env: str = "HF_TOKEN",
             rerun: str = "re-run") -> HarnessError:
    """A huggingface_hub / network exception as a one-line HarnessError with its fix."""
    _import_hf()
    import huggingface_hub.errors as errs
    page = hf_page(repo_id, repo_type)
    status = getattr(getattr(e, "response", None), "status_code", None)
    first = (str(e).splitlines() or [type(e).__name__])[0][:160]
    token_fix = (f"accept the license at {page} (logged in), create a read token at {HF}/settings/tokens "
                 f"and set {token_env}=<token> (export {token_env}=hf_...), then {rerun}")
    if isinstance(e, errs.GatedRepoError) or status in (401, 403):
        why = "gated: its license is not accepted for this account" if isinstance(e, errs.GatedRepoError) or status == 403 \
            else "gated or private and no valid token was sent"
        return MissingDataError(f"{repo_id}: access denied (HTTP {status or 403}): the repository is {why}", token_fix)
    if isinstance(e, errs.RevisionNotFoundError):
        return MissingDataError(f"{repo_id}: revision not found ({first})", f"check the pinned revision at {page}")
    if isinstance(e, errs.RepositoryNotFoundError) or status == 404:
        return MissingDataError(f"{repo_id}: repository not found on {HF} (HTTP {status or 404})",
                                f"check the name at {page}; if it is private or gated, {token_fix}")
    if isinstance(e, errs.OfflineModeIsEnabled) or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return MissingDataError(f"cannot download {repo_id}: Hugging Face offline mode is on (HF_HUB_OFFLINE)",
                                f"unset HF_HUB_OFFLINE (on a machine with network access), then {rerun}")
    if isinstance(e, OSError) and getattr(e, "errno", None):
        fs = from_os_error(e)
        if fs is not None:
            return fs
    if status is not None:
        return MissingDataError(f"{repo_id}: Hugging Face answered HTTP {status} ({first})",
                                f"retry later; check {page}, then {rerun}")
    return MissingDataError(f"cannot reach {HF} for {repo_id}: {type(e).__name__}: {first}",
                            f"check network access to huggingface.co (or set HF_ENDPOINT to a mirror), then {rerun}")


def reuse_complete(dest: Path, record: str, check: Callable[[Path], object], what: str, log=print) -> bool:
    """A folder whose completion record ``dest/record`` exists and whose ``check`` passes is reused
    (True). Otherwise the record is removed, so an interrupted or damaged download is fetched again."""
    if (dest / record).is_file():
        try:
            check(dest)
            log(f"{what} present: {dest}")
            return True
        except HarnessError:
            pass
    (dest / record).unlink(missing_ok=True)
    return False


def _token(token_env: str) -> str | None:
    return os.environ.get(token_env) or None      # None: huggingface_hub's own login (HF_TOKEN, `hf auth login`)


def hf_file_ok(path: Path, sibling) -> str | None:
    """None when ``path`` matches the Hub's record of it (size; sha256 for LFS files, git blob id
    otherwise), else why not."""
    if not path.is_file():
        return "missing"
    size = getattr(sibling, "size", None)
    lfs = getattr(sibling, "lfs", None)
    if lfs is not None and getattr(lfs, "size", None) is not None:
        size = lfs.size
    if size is not None and path.stat().st_size != size:
        return f"size {path.stat().st_size}, the Hub says {size}"
    if lfs is not None and getattr(lfs, "sha256", None):
        got = fileio.sha256_file(path)
        return None if got == lfs.sha256 else f"sha256 {got}, the Hub says {lfs.sha256}"
    blob = getattr(sibling, "blob_id", None)
    if blob:
        got = fileio.git_blob_sha1(path)
        return None if got == blob else f"git blob id {got}, the Hub says {blob}"
    return None


def hf_snapshot(repo_id: str, dest: Path, *, allow_patterns: Sequence[str] | None = None, revision: str | None = None,
                token_env: str = "HF_TOKEN", repo_type: str = "model", record: str | None = "download.json",
                rerun: str = "re-run", log=print) -> Path:
    """Files of ``repo_id`` (those matching ``allow_patterns``) into the folder ``dest``.

    The revision (default: the main branch) is first resolved to a commit sha, and everything is
    fetched at that commit; the sha is recorded in ``dest/<record>`` (written last, so its presence
    means the snapshot completed). Files go to a staging folder beside ``dest``
    (``.<dest>.hf-<sha>``, kept across failures so huggingface_hub resumes) and are moved into
    ``dest`` one by one once verified; other files already in ``dest`` are left alone (so a snapshot
    can add files to a folder, e.g. a tokenizer beside a checkpoint).

    Verified: each file's size, and its sha256 (LFS files) or git blob id (others) against the
    Hub's metadata of that commit. A file already in ``dest`` that verifies is not fetched again.
    Gated repos (HTTP 401/403) are a MissingDataError telling to accept the license and set
    ``token_env``; offline / unreachable is a MissingDataError too.
    """
    hf = _import_hf()
    dest = Path(dest)
    token = _token(token_env)
    try:
        info = hf.HfApi().repo_info(repo_id, revision=revision, repo_type=repo_type, files_metadata=True, token=token)
    except Exception as e:
        raise hf_error(e, repo_id, repo_type=repo_type, token_env=token_env, rerun=rerun) from None
    sha = info.sha
    siblings = list(info.siblings or [])
    if allow_patterns is not None:
        from huggingface_hub.utils import filter_repo_objects

        siblings = list(filter_repo_objects(siblings, allow_patterns=list(allow_patterns), key=lambda s: s.rfilename))
    if not siblings:
        raise MissingDataError(f"{repo_id}@{sha[:12]} has no file matching {list(allow_patterns or [])}",
                               f"check the file names at {hf_page(repo_id, repo_type)}")
    if record:
        (dest / record).unlink(missing_ok=True)           # incomplete until this snapshot finishes
    todo = [s for s in siblings if hf_file_ok(dest / s.rfilename, s) is not None]
    stage = dest.parent / f".{dest.name}.hf-{sha[:12]}"
    if todo:
        log(f"[hf] {repo_id}@{sha[:12]}: {len(todo)} of {len(siblings)} files to fetch -> {dest}")
        try:
            stage.mkdir(parents=True, exist_ok=True)
            hf.snapshot_download(repo_id, repo_type=repo_type, revision=sha, local_dir=str(stage),
                                 allow_patterns=[s.rfilename for s in todo], token=token)
        except HarnessError:
            raise
        except Exception as e:
            raise hf_error(e, repo_id, repo_type=repo_type, token_env=token_env, rerun=rerun) from None
        for s in todo:
            p = stage / s.rfilename
            why = hf_file_ok(p, s)
            if why is not None:
                p.unlink(missing_ok=True)
                raise MissingDataError(f"{repo_id}@{sha[:12]} {s.rfilename}: {why} (file discarded)",
                                       f"{rerun} to fetch it again")
        for s in todo:
            target = dest / s.rfilename
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / s.rfilename, target)
        shutil.rmtree(stage, ignore_errors=True)
    else:
        log(f"[hf] {repo_id}@{sha[:12]}: all {len(siblings)} files present and verified in {dest}")
    if record:
        fileio.write_json(dest / record, {"source": "huggingface", "repo": repo_id, "repo_type": repo_type,
                                          "revision": sha, "requested_revision": revision,
                                          "allow_patterns": list(allow_patterns) if allow_patterns else None,
                                          "files": sorted(s.rfilename for s in siblings)})
    return dest


def hf_resolve(repo_id: str, *, revision: str | None = None, repo_type: str = "model", token_env: str = "HF_TOKEN",
               rerun: str = "re-run"):
    """repo_info (with file metadata) at ``revision``, errors mapped by hf_error."""
    hf = _import_hf()
    try:
        return hf.HfApi().repo_info(repo_id, revision=revision, repo_type=repo_type, files_metadata=True,
                                    token=_token(token_env))
    except Exception as e:
        raise hf_error(e, repo_id, repo_type=repo_type, token_env=token_env, rerun=rerun) from None


def hf_file(repo_id: str, filename: str, sibling, *, revision: str, repo_type: str = "model",
            token_env: str = "HF_TOKEN", rerun: str = "re-run") -> Path:
    """One file at commit ``revision`` via hf_hub_download (into the Hugging Face cache, which is
    resumable), verified against ``sibling`` (its RepoSibling metadata) as in hf_snapshot."""
    hf = _import_hf()
    try:
        p = Path(hf.hf_hub_download(repo_id, filename, repo_type=repo_type, revision=revision,
                                    token=_token(token_env)))
    except Exception as e:
        raise hf_error(e, repo_id, repo_type=repo_type, token_env=token_env, rerun=rerun) from None
    why = hf_file_ok(p, sibling)
    if why is not None:
        raise MissingDataError(f"{repo_id}@{revision[:12]} {filename}: {why}",
                               f"delete it from the Hugging Face cache ({p}), then {rerun}")
    return p


# --- local copies -----------------------------------------------------------------------------------

def copy_local(src: Path, dest: Path, names: Iterable[str], *, md5: dict[str, str] | None = None,
               sha256: dict[str, str] | None = None, check: Callable[[Path], None] | None = None,
               fix: str | None = None, log=print) -> list[Path]:
    """Copy ``names`` from the folder ``src`` into the folder ``dest`` (each staged, then renamed),
    after checking each source file: its ``md5`` / ``sha256`` where given and ``check(path)`` (a
    validator raising HarnessError). When ``src`` is ``dest`` the files are only checked."""
    src, dest = Path(src).expanduser(), Path(dest)
    fix = fix or f"put the files in {src}, or drop --data_dir to download them"
    if not src.is_dir():
        raise MissingDataError(f"data folder {src} does not exist", fix)
    out = []
    for name in names:
        s = src / name
        if not s.is_file():
            raise MissingDataError(f"{s} not found", fix)
        if md5 and name in md5 and fileio.md5_file(s) != md5[name]:
            raise MissingDataError(f"{s}: md5 is not {md5[name]} (not the official file)", fix)
        if sha256 and name in sha256 and fileio.sha256_file(s) != sha256[name]:
            raise MissingDataError(f"{s}: sha256 is not {sha256[name]} (not the official file)", fix)
        if check is not None:
            check(s)
        d = dest / name
        if d.resolve() != s.resolve():
            with fileio.staged_path(d) as tmp:
                shutil.copyfile(s, tmp)
            log(f"[data] {name}: copied from {src}")
        out.append(d)
    return out


def check_hf_checkpoint(dest: Path, model_type: str, what: str, fix: str, *, read_config: bool = True,
                        tokenizer: Sequence[Sequence[str]] = (("tokenizer.json",), ("tokenizer.model",))) -> dict:
    """A loadable Hugging Face folder: config.json with ``model_type``, its weights (``check_weights``), a
    tokenizer (one of the ``tokenizer`` file groups), and a config transformers can read (when it is
    installed and ``read_config``). Returns the config."""
    dest = Path(dest)
    cfg_path = dest / "config.json"
    if not cfg_path.is_file():
        raise MissingDataError(f"{what} not found: {cfg_path} is missing", fix)
    cfg = fileio.read_json(cfg_path, fix)
    if cfg.get("model_type") != model_type:
        raise MissingDataError(f"{cfg_path}: model_type is {cfg.get('model_type')!r}, not {model_type!r}", fix)
    check_weights(dest, fix)
    if not any(all((dest / n).is_file() for n in group) for group in tokenizer):
        raise MissingDataError(f"no tokenizer in {dest} ({', or '.join(' + '.join(g) for g in tokenizer)})", fix)
    if not read_config:
        return cfg
    try:
        from transformers import AutoConfig
    except ImportError:
        return cfg
    try:
        AutoConfig.from_pretrained(str(dest), local_files_only=True)
    except Exception as e:
        raise MissingDataError(f"{dest}: transformers cannot read the config: {type(e).__name__}: "
                               f"{str(e).splitlines()[0][:120] if str(e) else ''}", fix) from None
    return cfg


def check_weights(dest: Path, fix: str) -> list[Path]:
    """The weight files of an HF folder: every shard an index names must exist and be non-empty (or one
    single weight file)."""
    for index_name, kind in (("model.safetensors.index.json", "safetensors"), ("pytorch_model.bin.index.json", "weight")):
        index = dest / index_name
        if index.is_file():
            wm = fileio.read_json(index, fix).get("weight_map")
            if not isinstance(wm, dict) or not wm:
                raise MissingDataError(f"{index}: no weight_map", fix)
            shards = sorted(set(wm.values()))
            bad = [s for s in shards if not (dest / s).is_file() or (dest / s).stat().st_size == 0]
            if bad:
                raise MissingDataError(f"{dest}: {len(bad)} of {len(shards)} {kind} shards listed in {index_name} "
                                       f"are missing or empty (first: {bad[0]})", fix)
            return [dest / s for s in shards]
    for single in ("model.safetensors", "pytorch_model.bin"):
        if (dest / single).is_file() and (dest / single).stat().st_size:
            return [dest / single]
    raise MissingDataError(f"no model weights in {dest} (no *.index.json, model.safetensors or pytorch_model.bin)", fix)


# --- single data files from R2 (Mixtral-8x7B, Llama3.1-8B) ------------------------------------------

def metadata_unreachable(e: HarnessError) -> bool:
    return e.cause.startswith("could not fetch R2 metadata")


def r2_data_file(uri: str, name: str, md5: str, dest_dir: Path, *, data_base: str, check: Callable[[Path], object],
                 tag: str, log=print) -> str:
    """``dest_dir/name`` from the R2 folder ``uri`` names (md5-checked), or from ``data_base/name`` when the
    R2 metadata cannot be fetched (still md5-checked); then ``check(path)`` on its content: a file failing
    it is removed. Returns how it was fetched, for the download record."""
    final = Path(dest_dir) / name
    how = "mlcommons-r2"
    try:
        r2_download(uri, dest_dir, log=log, include=lambda p: p == name, expect_md5={name: md5})
    except HarnessError as e:
        if not metadata_unreachable(e):
            raise
        url = f"{data_base}/{name}"
        log(f"{tag} R2 metadata unreachable ({e.cause}); trying {url}")
        try:
            fileio.download(url, final, md5=md5, fix=f"re-run to resume, or {r2_command(uri, dest_dir)}")
        except HarnessError as e2:
            if "checksum mismatch" in e2.cause:
                raise
            raise e from None
        how = "plain URL " + url
    try:
        check(final)
    except HarnessError as e:
        final.unlink(missing_ok=True)
        raise MissingDataError(f"{e.cause} (file removed)", e.fix) from None
    log(f"{tag} {name}: md5 {md5} ok, content ok -> {final}")
    return how


def merge_record(path: Path, benchmark: str, updates: dict, fix: str) -> None:
    """A download record ``{"benchmark", "files": {name: {...}}}`` with ``updates`` merged in (atomic)."""
    files = {}
    if path.is_file():
        try:
            files = dict(fileio.read_json(path, fix).get("files") or {})
        except HarnessError:
            files = {}
    files.update(updates)
    fileio.write_json(path, {"benchmark": benchmark, "files": files})


class DataFile(NamedTuple):
    """One pinned file of an R2 data folder: its name, .uri metadata URL, md5, and content check
    ``check(path, fix, name)``; ``main``: the file a ``--data_dir`` must hold (the others fall back to R2)."""
    name: str
    uri: str
    md5: str
    check: Callable[[Path, str, str], object]
    main: bool = True


def with_calibration(dataset: DataFile, calibration: DataFile, include: bool) -> list[DataFile]:
    """The files a download_data fetches: the evaluation set, and the calibration set (never the main file) when
    asked for."""
    return [dataset, calibration._replace(main=False)] if include else [dataset]


def nonempty_frame(path: Path, fix: str, name: str | None, columns: Sequence[str]):
    """A pickled DataFrame with ``columns`` and at least one row (a calibration set: its md5 is what pins it)."""
    name = name or Path(path).name
    df = fileio.read_dataframe(Path(path), fix, tuple(columns), name)
    if len(df) == 0:
        raise MissingDataError(f"{name} holds no rows", fix)
    return df


def local_data_file(data_dir: str, name: str, main: bool, subfolders: Sequence[str] = ()) -> Path | None:
    """Where ``--data_dir`` holds ``name``: the folder itself or one of its ``subfolders``; a file given as
    ``--data_dir`` is taken for the main file whatever its name (its md5 decides)."""
    d = Path(data_dir).expanduser()
    if d.is_file():
        if main:
            return d
        d = d.parent
    for folder in (d, *(d / s for s in subfolders)):
        if (folder / name).is_file():
            return folder / name
    return None


def data_files(dest_dir: Path, files: Sequence[DataFile], data_dir: str | None, *, data_base: str, benchmark: str,
               fix: str, record: str = "download.json", subfolders: Sequence[str] = (), log=print) -> dict[str, Path]:
    """Each of ``files`` into ``dest_dir``: from ``data_dir`` when given (md5 first, then content, then
    copied through a staged file; a missing main file is an error, a missing other one is fetched), else a
    copy already in ``dest_dir`` with the right md5, else from MLCommons R2 (r2_data_file). What was
    verified is merged into ``dest_dir/record``. Returns {name: path}."""
    dest_dir = Path(dest_dir)
    tag = f"[{benchmark}]"
    done, out = {}, {}
    for f in files:
        final = dest_dir / f.name
        out[f.name] = final
        if data_dir:
            local_fix = (f"point --data_dir at a folder holding the MLCommons {f.name} "
                         f"({r2_command(f.uri, '<folder>')}), or drop --data_dir to download it")
            src = local_data_file(data_dir, f.name, f.main, subfolders)
            if src is not None:
                got = fileio.md5_file(src)
                if got != f.md5:
                    raise MissingDataError(f"{src}: md5 {got}, expected {f.md5} (not the official file)", local_fix)
                f.check(src, local_fix, f.name)
                if src.resolve() != final.resolve():
                    with fileio.staged_path(final) as tmp:
                        shutil.copyfile(src, tmp)
                log(f"{tag} {f.name}: md5 {f.md5} ok, content ok, from {src}")
                done[f.name] = {"md5": f.md5, "source": f"local copy {src}"}
                continue
            if f.main:
                raise MissingDataError(f"{f.name} not found in {data_dir}", local_fix)
            log(f"{tag} {f.name} not in {data_dir}: fetching it from MLCommons R2")
        if final.is_file() and fileio.md5_file(final) == f.md5:
            log(f"{tag} {f.name} present, md5 ok: {final}")
            continue
        done[f.name] = {"md5": f.md5, "source": r2_data_file(
            f.uri, f.name, f.md5, dest_dir, data_base=data_base, tag=tag, log=log,
            check=lambda p, f=f: f.check(p, fix, f.name))}
    if done:
        merge_record(dest_dir / record, benchmark, done, fix)
    return out


# --- gated Hugging Face models with a members-only R2 copy (Llama2-70B, Llama3.1-8B) ----------------

def r2_checkpoint(dest: Path, uri: str, pins: dict[str, str], *, check: Callable[[Path], dict], record: str,
                  describe: Callable[[dict], dict], fix: str, tag: str, log=print) -> Path:
    """A public MLCommons R2 checkpoint into ``dest``: every file of ``pins`` ({path: md5}) from R2 (a file already
    there is reused when its md5 matches, an interrupted one resumes), then ``check(dest)`` (returns the config);
    ``dest/record`` is written last with ``describe(config)``. A folder whose record exists and checks is reused.
    When the R2 metadata cannot be fetched but ``dest`` already holds every file (e.g. filled by the official
    script), they are verified offline against the pins instead."""
    dest = Path(dest)
    if reuse_complete(dest, record, check, f"{tag} checkpoint", log):
        return dest
    entries = sorted((m, p) for p, m in pins.items())
    try:
        r2_download(uri, dest, log=log, include=lambda p: p in pins, expect_md5=pins)
        source = "mlcommons-r2"
    except HarnessError as e:
        if not (metadata_unreachable(e) and all((dest / p).is_file() for _, p in entries)):
            raise
        log(f"{tag} R2 metadata unreachable ({e.cause}); verifying the {len(entries)} files in {dest} offline")
        verify_md5_list(dest, entries, f"delete the bad file, then {fix} (online)")
        source = "local folder, verified against the pinned MLCommons md5 list"
    cfg = check(dest)
    fileio.write_json(dest / record, {"source": source, "uri": uri, **describe(cfg)})
    log(f"{tag} checkpoint ({len(entries)} files, md5-verified) -> {dest}")
    return dest


def members_files(pins: dict[str, str], patterns: Sequence[str]) -> list[tuple[str, str]]:
    """[(md5, path)] of the pinned files matching ``patterns`` (the ones a harness loads)."""
    from fnmatch import fnmatch

    return sorted((m, p) for p, m in pins.items() if any(fnmatch(p, pat) for pat in patterns))


def members_verifier(list_name: str, pins: dict[str, str], patterns: Sequence[str], uri: str, fix: str, tag: str
                      ) -> Callable[[Path, Callable], dict]:
    """For gated_model: a folder filled by the official R2 script from a members-only bucket, verified. The files
    matching ``patterns`` are checked against the pinned ``pins`` ({path: md5}); the list the script left
    (``list_name``) must agree with the pins."""
    need = members_files(pins, patterns)

    def verify(dest: Path, log=print) -> dict:
        listing = Path(dest) / list_name
        listed = {p: m for m, p in parse_md5_list(listing.read_text(), str(listing))}
        for m, p in need:
            if p in listed and listed[p] != m:
                raise HarnessError(f"{listing} gives md5 {listed[p]} for {p}, but this harness pins {m}",
                                   "MLCommons changed the model: check the benchmark README and update the pin", 3)
        verify_md5_list(Path(dest), need, f"re-run {r2_command(uri, dest)} to resume, then {fix}")
        log(f"{tag} {len(need)} files verified against the pinned {list_name} (MLCommons R2 copy)")
        return {"source": "mlcommons-r2 (members)", "uri": uri, "verified_md5": {p: m for m, p in need}}
    return verify


def gated_model(dest: Path, *, repo: str, files: Sequence[str], revision: str | None, complete: str,
                members_list: str, verify_members: Callable[[Path, Callable], dict], check: Callable[[Path], object],
                members_fix: Callable[[Path], str], fix: str, tag: str, log=print) -> Path:
    """A gated model into ``dest``: reused when its record (``complete``) exists and the folder checks; else,
    when ``dest`` holds the members-only R2 copy (its ``members_list``), that copy verified; else
    ``hf_snapshot`` of ``repo`` (at ``revision`` when pinned; every file checked against the Hub), an
    access error naming the license, HF_TOKEN and the members route (``members_fix``). The record is
    written last and removed again if the folder does not check."""
    dest = Path(dest)
    if reuse_complete(dest, complete, check, f"{tag} model", log):
        return dest
    if (dest / members_list).is_file():
        rec = verify_members(dest, log)
        check(dest)
        fileio.write_json(dest / complete, rec)
        return dest
    try:
        hf_snapshot(repo, dest, allow_patterns=list(files), revision=revision, record=complete, rerun=fix, log=log)
    except HarnessError as e:
        if "access denied" in e.cause or "repository not found" in e.cause:
            raise MissingDataError(e.cause, members_fix(dest)) from None
        raise
    try:
        rec = fileio.read_json(dest / complete, fix)
        if revision and rec.get("revision") != revision:
            raise MissingDataError(f"{repo}: the Hub resolved {revision[:12]} to {rec.get('revision')}",
                                   f"delete {dest}, then {fix}")
        check(dest)
    except HarnessError:
        (dest / complete).unlink(missing_ok=True)       # the record says complete only for a loadable folder
        raise
    log(f"{tag} {repo}{'@' + revision[:12] if revision else ''} verified -> {dest}")
    return dest


# --- NLTK's punkt_tab (the sentence splitter of rougeLsum) -------------------------------------------
#
# What nltk.download("punkt_tab") does (nltk.downloader.Downloader), and download_punkt_tab reproduces
# through $MLPERF_DOWNLOAD_MIRROR:
#   1. GET the index XML at Downloader.DEFAULT_URL; its <package id="punkt_tab"> gives the zip's url,
#      size, unzipped_size, md5 ``checksum`` (and ``sha256_checksum`` where the index has one) and subdir
#      ("tokenizers").
#   2. GET the zip; it must have the index's size and checksum (sha256 when given, else md5), or it is
#      discarded.
#   3. Unzip it into <data dir>/<subdir>/ (every member under the top-level folder "punkt_tab/", the whole
#      no larger than unzipped_size); the zip is kept beside it, as NLTK keeps it.
# Here the unzip goes to a staging folder that is renamed into place only once punkt_tab's english model
# loads from it, and a record (rouge.RECORD) is written last.

NLTK_INDEX_URL = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/index.xml"   # Downloader.DEFAULT_URL
UNZIP_SLACK = 1 << 20


def _punkt_fix(fix: str) -> str:
    return (f"check network access to raw.githubusercontent.com (${fileio.MIRROR_ENV} names a mirror), then {fix}; "
            "or unzip NLTK's punkt_tab.zip into <nltk_data>/tokenizers/ yourself")


def punkt_index_entry(index_xml: str, fix: str):
    """The punkt_tab entry of NLTK's index, parsed and checked by NLTK's own ``Package`` (id, subdir)."""
    import xml.etree.ElementTree as ET

    from nltk.downloader import Package

    from code.common.llm import rouge

    try:
        root = ET.fromstring(index_xml)
    except ET.ParseError as e:
        raise HarnessError(f"NLTK's data index is not XML ({e})", _punkt_fix(fix), 3) from None
    el = next((p for p in root.iter("package") if p.get("id") == rouge.PUNKT), None)
    if el is None:
        raise HarnessError(f"NLTK's data index lists no package {rouge.PUNKT}", _punkt_fix(fix), 3)
    try:
        pkg = Package.fromxml(el)
    except (TypeError, ValueError) as e:      # a missing size, a bad subdir or id
        raise HarnessError(f"NLTK's index entry for {rouge.PUNKT} is malformed: {e}", _punkt_fix(fix), 3) from None
    if not pkg.url.endswith(".zip") or not (pkg.checksum or getattr(pkg, "sha256_checksum", None)):
        raise HarnessError(f"NLTK's index entry for {rouge.PUNKT} names no zip with a checksum", _punkt_fix(fix), 3)
    return pkg


def _unzip_punkt(zpath: Path, dest: Path, package_id: str, unzipped_size: int, fix: str) -> None:
    """The zip's members under ``<package_id>/`` into ``dest`` (that prefix removed); refuses members
    elsewhere, links, and more bytes than the index declared (NLTK's own rules)."""
    import zipfile

    try:
        zf = zipfile.ZipFile(zpath)
    except zipfile.BadZipFile as e:
        raise HarnessError(f"{zpath.name} is not a zip ({e})", _punkt_fix(fix), 3) from None
    with zf:
        total = 0
        for info in zf.infolist():
            parts = Path(info.filename).parts
            if not parts or parts[0] != package_id or ".." in parts or info.filename.startswith("/"):
                raise HarnessError(f"{zpath.name}: member {info.filename!r} is outside {package_id}/",
                                   _punkt_fix(fix), 3)
            total += info.file_size
            if total > unzipped_size + UNZIP_SLACK:
                raise HarnessError(f"{zpath.name} unzips to more than the {unzipped_size} bytes NLTK's index "
                                   "declares", _punkt_fix(fix), 3)
            target = dest.joinpath(*parts[1:]) if len(parts) > 1 else dest
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)


def download_punkt_tab(data_dir: Path | None = None, *, fix: str, tag: str = "[nltk]", log=print) -> Path:
    """NLTK's punkt_tab into ``data_dir`` (default ``rouge.nltk_data_dir()``), as ``nltk.download`` installs
    it (see the notes above); reused when the record and the model are in place. ``fix``: the make command
    that reruns this. Returns the punkt_tab folder."""
    from code.common.llm import rouge

    data_dir = Path(data_dir or rouge.nltk_data_dir())
    final = rouge.punkt_dir(data_dir)
    rec = rouge.read_record(data_dir)
    if rec.get("variant") == "official":
        try:
            rouge.load_punkt(data_dir)
            log(f"{tag} {rouge.PUNKT} present ({rec.get('sha256') or rec.get('md5')}): {final}")
            return final
        except (LookupError, OSError, ValueError):
            pass
    try:
        index = fetch_text(NLTK_INDEX_URL)
    except PermissionError as e:
        raise HarnessError(f"could not fetch NLTK's data index {NLTK_INDEX_URL}: {e}", _punkt_fix(fix), 3) from None
    except Exception as e:     # DNS, refused, timeout, HTTP errors
        raise HarnessError(f"could not fetch NLTK's data index {fileio.mirrored(NLTK_INDEX_URL)}: "
                           f"{type(e).__name__}: {e}".replace("\n", " "), _punkt_fix(fix), 3) from None
    pkg = punkt_index_entry(index, fix)
    sha256 = getattr(pkg, "sha256_checksum", None) or None
    md5 = None if sha256 else pkg.checksum

    def size_ok(p: Path) -> None:
        if p.stat().st_size != pkg.size:
            raise HarnessError(f"{pkg.url}: {p.stat().st_size} bytes, NLTK's index says {pkg.size} (file discarded)",
                               _punkt_fix(fix), 3)

    zpath = data_dir / pkg.subdir / f"{pkg.id}.zip"
    fileio.download(pkg.url, zpath, sha256=sha256, md5=md5, check=size_ok, fix=fix)
    try:
        with fileio.staged_dir(final) as tmp:
            _unzip_punkt(zpath, tmp, pkg.id, pkg.unzipped_size, fix)
            try:                          # it must load from the staging folder before the swap
                rouge.load_punkt(tmp, tmp / rouge.LANGUAGE)
            except (LookupError, OSError, ValueError) as e:
                zpath.unlink(missing_ok=True)
                raise HarnessError(f"{pkg.url} holds no loadable {rouge.PUNKT}/{rouge.LANGUAGE} model "
                                   f"({type(e).__name__})", _punkt_fix(fix), 3) from None
    except OSError as e:
        raise from_os_error(e) or HarnessError(f"cannot unzip {zpath}: {e}", f"free space in {data_dir}, then {fix}")
    fileio.write_json(data_dir / rouge.RECORD, {
        "package": pkg.id, "variant": "official", "index": NLTK_INDEX_URL, "url": pkg.url, "size": pkg.size,
        "unzipped_size": pkg.unzipped_size, "sha256": sha256, "md5": pkg.checksum,
        "source": fileio.mirrored(pkg.url)})
    log(f"{tag} {rouge.PUNKT}: size {pkg.size} and {'sha256' if sha256 else 'md5'} ok (NLTK's index) -> {final}")
    return final


def punkt_params_files(params) -> dict[str, str]:
    """Punkt parameters as the four files of a punkt_tab language folder, in the format NLTK's
    ``load_punkt_params`` reads (nltk.tabdata's encoder, as ``save_punkt_params`` writes them)."""
    from nltk.tabdata import TabEncoder

    enc = TabEncoder()
    return {"collocations.tab": enc.tups2tab(params.collocations), "sent_starters.txt": enc.set2txt(params.sent_starters),
            "abbrev_types.txt": enc.set2txt(params.abbrev_types), "ortho_context.tab": enc.ivdict2tab(params.ortho_context)}


TINY_PUNKT_TITLES = ("Mr.", "Mrs.", "Dr.", "Prof.", "St.", "Gen.", "Capt.")


def tiny_punkt_params(seed: int = 0):
    """A Punkt model trained with NLTK's PunktTrainer on local text: synthetic sentences, a third of them
    opening with a title ("Dr. <word> ..."), so that it learns abbreviations the untrained splitter does
    not know."""
    from nltk.tokenize.punkt import PunktTrainer

    from code.common.llm import tiny

    g = tiny.TextGen(tiny.SEED + 11 + seed)
    sentences = [g.sentence() for _ in range(1500)]
    text = " ".join(f"{TINY_PUNKT_TITLES[i % len(TINY_PUNKT_TITLES)]} {s}" if i % 3 == 0 else s
                    for i, s in enumerate(sentences))
    trainer = PunktTrainer()
    trainer.train(text, finalize=True)
    return trainer.get_params()


def install_tiny_punkt_tab(data_dir: Path | None = None, log=print) -> Path:
    """The tiny variant's punkt_tab (tiny_punkt_params) into ``data_dir`` (default
    ``rouge.nltk_data_dir("tiny")``), with a record marking it tiny; kept when already there. No network."""
    from code.common.llm import rouge

    data_dir = Path(data_dir or rouge.nltk_data_dir("tiny"))
    final = rouge.punkt_dir(data_dir)
    if rouge.read_record(data_dir).get("variant") == "tiny" and (final / rouge.LANGUAGE).is_dir():
        return final
    with fileio.staged_dir(final) as tmp:
        lang = tmp / rouge.LANGUAGE
        lang.mkdir()
        for name, text in punkt_params_files(tiny_punkt_params()).items():
            (lang / name).write_text(text, encoding="utf-8", newline="")
    fileio.write_json(data_dir / rouge.RECORD, {"package": rouge.PUNKT, "variant": "tiny",
                                                "trained_on": "synthetic text (code.common.llm.download.tiny_punkt_params)"})
    log(f"[download_data] tiny {rouge.PUNKT} (trained locally, not NLTK's) -> {final}")
    return final
