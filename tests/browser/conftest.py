"""A real JupyterLab on 127.0.0.1 and a headless Chromium driven by Playwright.

JupyterLab runs on a temporary copy of the notebooks with its own config, runtime, settings and workspace
folders, so nothing the test does touches the repository or the user's Jupyter. Chromium is Debian's
(`apt-get install -y chromium`), launched through the pip `playwright` package's bundled driver; no
`playwright install`. A missing browser is an error with the install line, never a skip.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("BROWSER_EXECUTABLE", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SETTINGS = {  # user settings JupyterLab reads at start
    # a news/update toast would cover outputs in screenshots
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True},
    # every cell in the DOM (no virtual scrolling), so every output can be checked
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


# extensions other packages install that the browser tests keep out of the page (nbgrader, a test dependency,
# brings a lab extension, server extensions and Notebook 7's lab buttons; none is part of what learners see)
DISABLED_LAB_EXTENSIONS = ["@jupyter/nbgrader", "@jupyter-notebook/lab-extension"]
DISABLED_SERVER_EXTENSIONS = ["nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.validate_assignment",
                              "nbgrader.server_extensions.assignment_list", "nbgrader.server_extensions.course_list"]


def lab_config(config_dir: Path) -> dict[str, str]:
    """The JupyterLab config the browser tests start with: the extensions above switched off; the environment
    variables it needs (in a virtual environment Jupyter prefers the environment's config over the user's)."""
    (config_dir / "labconfig").mkdir(parents=True, exist_ok=True)
    (config_dir / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {name: True for name in DISABLED_LAB_EXTENSIONS}}))
    (config_dir / "jupyter_server_config.d").mkdir(parents=True, exist_ok=True)
    (config_dir / "jupyter_server_config.d" / "zz-browser-tests.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {name: False for name in DISABLED_SERVER_EXTENSIONS}}}))
    return {"JUPYTER_CONFIG_DIR": str(config_dir), "JUPYTER_PREFER_ENV_PATH": "0"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def lab(tmp_path_factory) -> str:
    """URL of a JupyterLab serving a copy of the repository's notebooks; stopped at the end of the session."""
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "root"
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "exercises")
    shutil.copytree(ROOT / "chapters", root / "chapters", ignore=ignore)
    shutil.copytree(ROOT / "widgets", root / "widgets", ignore=ignore)
    (root / "tests" / "browser").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "browser" / "placeholder.ipynb", root / "tests" / "browser")
    env = dict(os.environ)
    for name in ("config", "runtime", "settings", "workspaces", "data"):
        (tmp / name).mkdir()
    env.update(JUPYTER_CONFIG_DIR=str(tmp / "config"), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"))
    env.update(lab_config(tmp / "config"))
    for rel, value in SETTINGS.items():
        f = tmp / "settings" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(value))
    port = _free_port()
    log = open(tmp / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--ServerApp.root_dir={root}", "--IdentityProvider.token=", "--ServerApp.password=",
         "--ServerApp.disable_check_xsrf=True", "--LabApp.expose_app_in_browser=True",
         "--LabApp.news_url=", "--ServerApp.open_browser=False", "--allow-root"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start:\n{(tmp / 'lab.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def browser():
    """Headless Debian Chromium through Playwright; a clear error (not a skip) when it is missing."""
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: install it (Debian/Ubuntu: apt-get install -y chromium) or set "
                    "BROWSER_EXECUTABLE; deselect these tests with -m 'not browser' only on purpose", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def screens_dir() -> Path:
    """Where screenshots go: $BROWSER_SCREENSHOTS, else tests/browser/screens (git-ignored). A failing page's
    always; a passing page's only when $BROWSER_SCREENSHOTS is set (test_notebooks_in_browser.py)."""
    d = Path(os.environ.get("BROWSER_SCREENSHOTS", ROOT / "tests" / "browser" / "screens"))
    d.mkdir(parents=True, exist_ok=True)
    return d
