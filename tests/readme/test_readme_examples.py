"""The README examples, run as written: extracted from the Markdown, so the two cannot
drift apart.

Every line of a shell code block (fences without a language, or ``sh``) in README.md,
traffic/README.md and softswitch/README.md is one example; ``\\`` continues a line.
Output shown in the READMEs sits in ``text`` blocks and is not run.  An example's
trailing comment may say what it needs, and the README then shows it to the reader:

* ``# needs WHAT``: it cannot run here as written (a test-bed host, an interface, BMv2,
  minutes of Mininet; other tests run those parts); skipped with the README's words,
  but run where WHAT is only root and bcc and the machine has them;
* ``# until Ctrl-C``: a server; it passes when it is still running after a few
  seconds (then it is stopped), or exits 0.

Every other example must exit 0.  The examples of one code block run in order in one
scratch folder (later ones read what earlier ones wrote: ``controller keys`` then
``controller run --key-file keys.yaml``) that links the checkout's folders, so relative
paths work and nothing is written into the checkout.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READMES = ("README.md", "traffic/README.md", "softswitch/README.md")
SHELL_FENCES = ("", "sh", "shell", "bash")
SERVER_S = 12.0       # a server must still be up after this long (the controller
                      # writes its first state after 5 s of trying the switches)
TIMEOUT_S = 240.0     # any other example must finish within this


@dataclass(frozen=True)
class Example:
    readme: str
    line: int
    block: int
    command: str      # as written, comment removed
    needs: str | None
    server: bool

    @property
    def id(self) -> str:
        return f"{self.readme}:{self.line}"


def _split_comment(line: str) -> tuple[str, str]:
    """Command and trailing comment (a ``#`` outside quotes, after whitespace)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


def examples(readme: str) -> list[Example]:
    out: list[Example] = []
    lines = (ROOT / readme).read_text(encoding="utf-8").splitlines()
    fence: str | None = None
    block = 0
    i = 0
    while i < len(lines):
        text = lines[i]
        if text.startswith("```"):
            if fence is None:
                fence, block = text[3:].strip(), block + 1
            else:
                fence = None
            i += 1
            continue
        if fence in SHELL_FENCES and text.strip() and not text.startswith((" ", "#")):
            start = i
            while text.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text.rstrip()[:-1] + " " + lines[i].strip()
            cmd, comment = _split_comment(text)
            m = re.search(r"\bneeds\b(.*)", comment)
            out.append(Example(readme=readme, line=start + 1, block=block, command=cmd,
                               needs=m.group(1).strip(" :,") or comment if m else None,
                               server="until Ctrl-C" in comment))
        i += 1
    return out


ALL = [e for r in READMES for e in examples(r)]


def test_the_readmes_have_examples() -> None:
    assert {e.readme for e in ALL} == set(READMES)
    runnable = [e for e in ALL if e.needs is None]
    assert len(runnable) >= 20, [e.id for e in runnable]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], Path]:
    """One scratch folder per code block, linking the checkout's top-level entries."""
    made: dict[tuple[str, int], Path] = {}

    def get(key: tuple[str, int]) -> Path:
        if key not in made:
            d = tmp_path_factory.mktemp("readme")
            for entry in ROOT.iterdir():
                if not entry.name.startswith("."):
                    (d / entry.name).symlink_to(entry)
            made[key] = d
        return made[key]
    return get  # type: ignore[return-value]


def _satisfied(needs: str) -> bool:
    """Needs this machine meets: root, bcc (CI runs as root with bcc)."""
    words = set(re.split(r"[\s,]+", needs.strip())) - {"and", ""}
    have = set()
    if os.geteuid() == 0:
        have.add("root")
        if importlib.util.find_spec("bcc") is not None:
            have.add("bcc")
    return bool(words) and words <= have


def _argv(cmd: str) -> tuple[dict[str, str], list[str]]:
    words = shlex.split(cmd)
    env = {}
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        k, _, v = words.pop(0).partition("=")
        env[k] = v
    if words and words[0] == "python":
        words[0] = sys.executable
    return env, words


@pytest.mark.slow
@pytest.mark.parametrize("ex", ALL, ids=[e.id for e in ALL])
def test_readme_example(ex: Example, scratch) -> None:
    if ex.needs is not None and not _satisfied(ex.needs):
        pytest.skip(f"needs {ex.needs} (as the README says)")
    cwd = scratch((ex.readme, ex.block))
    extra, argv = _argv(ex.command)
    env = {**os.environ, **extra,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    if ex.server:
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
        deadline = time.monotonic() + SERVER_S
        while time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.2)
        rc = p.poll()
        if rc is None:
            os.killpg(p.pid, signal.SIGINT)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            return
        out = p.stdout.read() if p.stdout else ""
        assert rc == 0, f"{ex.id}: {ex.command}\nexit {rc}\n{out[-3000:]}"
        return
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False,
                       timeout=TIMEOUT_S)
    assert r.returncode == 0, (f"{ex.id}: {ex.command}\nexit {r.returncode}\n"
                               f"{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
