"""binder/: the configuration checked the way repo2docker reads it (its own Dockerfile generator, no Docker).

`repo2docker --no-build --debug --no-run .` prints the Dockerfile Binder would build. The expected lines are
repo2docker's documented behaviour for a binder/requirements.txt with a local reference (`-e .`): the whole
repository is copied first, then pip installs the file from the repository root.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"


def pins(path: Path) -> dict[str, str]:
    """name -> version of the `name==version` lines of a requirements file."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_binder_is_requirements_txt_with_the_cpu_torch():
    binder, main = pins(BINDER / "requirements.txt"), pins(ROOT / "requirements.txt")
    assert binder == {"torch": main["torch"] + "+cpu"}  # the CPU build of the same release, nothing else pinned twice
    lines = [x.split("#")[0].strip() for x in (BINDER / "requirements.txt").read_text().splitlines()]
    assert [x for x in lines if x] == ["--extra-index-url https://download.pytorch.org/whl/cpu",
                                       f"torch=={binder['torch']}", "-r ../requirements.txt"]
    assert "-e .[widgets]" in (ROOT / "requirements.txt").read_text().splitlines()  # the project, widgets too


def test_repo2docker_dockerfile_installs_binder_requirements_on_the_pinned_python():
    exe = shutil.which("repo2docker") or str(Path(sys.executable).parent / "repo2docker")
    r = subprocess.run([exe, "--no-build", "--debug", "--no-run", str(ROOT)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    version = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")  # e.g. "3.11"
    assert f"Building conda environment for python={version}" in out
    assert "environment-2epy-2d" + version.replace(".", "-2e") + "-2dlinux-2d64-2elock" in out  # its lock file
    copy_repo = out.index("COPY --chown=0:0 src/ ${REPO_DIR}/")
    install = out.index('${KERNEL_PYTHON_PREFIX}/bin/pip install --no-cache-dir -r "binder/requirements.txt"')
    assert copy_repo < install  # `-r ../requirements.txt` and `-e .` need the repository in place first
    assert "apt-get install --yes --no-install-recommends fonts-noto-cjk" in out  # binder/apt.txt: the zh-TW font
    assert "requirements-test.txt" not in out and 'pip install --no-cache-dir -r "requirements.txt"' not in out


BADGE = r"\(https://mybinder\.org/v2/gh/[^/\s]+/[^/\s]+/HEAD\?urlpath=lab/tree/([^)\s]+)\)"


def test_the_badge_recipe_opens_chapter_7_0_in_jupyterlab_chinese_first():
    """binder/README.md keeps the two badges to paste once the repository is public (zh-TW first)."""
    found = re.findall(BADGE, (ROOT / "binder" / "README.md").read_text(encoding="utf-8"))
    assert found == ["chapters/zh-TW/7.0-why-batching.ipynb", "chapters/7.0-why-batching.ipynb"]
    assert all((ROOT / f).is_file() for f in found)


def test_no_readme_asks_a_learner_to_click_a_link_that_leads_nowhere():
    """Until the repository has a public address, no README shows a badge pointing at the OWNER/REPO placeholder."""
    for readme in [ROOT / "README.md", *sorted((ROOT / "chapters").glob("**/README.md"))]:
        text = readme.read_text(encoding="utf-8")
        assert "mybinder.org/v2/gh/OWNER" not in text and "mybinder.org/badge_logo" not in text, readme



# ---- every Linux set-up takes the CPU-only torch ----------------------------------------------------------------
SIZES = re.compile(r"\d+(?:\.\d+)? [MG]B")  # a download size as the README writes it: "191.8 MB", "2.2 GB"
LINUX_SETUPS = {  # a file -> where its text that sets up a Linux machine starts and ends (a grader's is one)
    "chapters/instructors/README.md": ("Install the learner requirements", "**1. Learners check"),
    "chapters/instructors/README.zh-TW.md": ("在儲存庫的根目錄安裝學生用的套件", "**1. 學生自我檢查"),
    "chapters/README.md": ("docker run", "Inside a container"),
    "README.md": ("**繁體中文**", "**English**"),
}


def setup_text(path: str, start: str, end: str) -> str:
    text = (ROOT / path).read_text(encoding="utf-8")
    assert start in text and end in text, f"{path}: its Linux set-up moved (update LINUX_SETUPS)"
    return text[text.index(start):text.index(end, text.index(start))]


def test_every_linux_setup_installs_the_cpu_torch_with_the_readmes_sizes():
    """The teacher's quick start (both languages), the Docker grading recipe and the README's Chinese paragraph set
    a Linux machine up from binder/requirements.txt, and state the download sizes the README's Set up states."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme[readme.index("## Set up"):]
    sizes = SIZES.findall(setup.split("\n\n## ")[0])
    assert sizes == ["191.8 MB", "526.6 MB", "2.2 GB", "2.5 GB"], sizes  # what "Set up" states, in its order
    for path, (start, end) in LINUX_SETUPS.items():
        text = setup_text(path, start, end)
        assert "binder/requirements.txt" in text, f"{path}: its Linux set-up does not install binder/requirements.txt"
        assert SIZES.findall(text) == sizes, f"{path}: states {SIZES.findall(text)}, the README {sizes}"
