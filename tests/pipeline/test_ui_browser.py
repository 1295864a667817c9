"""The Prefect UI, in headless Chromium, shows what the stages publish: a real local stack (Prefect server, process
worker, the prefect.yaml deployments), two deployment runs started with `prefect deployment run … --watch`
(generate-sts-triples/adhoc against the scripted LLM server, the session's run shared with tests/pipeline/test_deployment.py;
then label-pairs/label-adhoc on its triples with the tiny causal LM), then the UI served by that same server,
navigated as a user would: a flow run's page, its Artifacts tab, an artifact's page (progress, table, markdown summary, the label plot as a data: URL image) and the
artifacts list.

Full-page screenshots go to $STSGEN_TEST_OUTPUTS (default data/outputs/test-screenshots/, git-ignored); their paths
are printed (`pytest -s` shows them). Skipped only when playwright or a chromium binary is missing."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import PROJECT, prefect_cli

pytestmark = pytest.mark.slow

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
                 if p and Path(p).is_file()), None)
if CHROMIUM is None:
    pytest.skip("no chromium binary (/usr/bin/chromium; apt-get install chromium)", allow_module_level=True)

# As root, offline (../shared/docs/offline-stack.md, "Browser checks").
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 60_000  # a slow, busy 2-core CI machine
VIEWPORT = {"width": 1400, "height": 900}
# The UI scrolls an inner container, not the document: a "full page" screenshot needs a viewport as tall as the
# tallest scrolled content.
CONTENT_HEIGHT = """() => {
  let h = document.documentElement.scrollHeight;
  for (const e of document.querySelectorAll('*')) {
    const y = getComputedStyle(e).overflowY;
    if ((y === 'auto' || y === 'scroll') && e.scrollHeight > e.clientHeight + 1)
      h = Math.max(h, e.getBoundingClientRect().top + e.scrollHeight);
  }
  return Math.ceil(h);
}"""

GENERATE = {"generate-progress": "progress", "generate-samples": "table", "generate-summary": "markdown",
            "generate-triples-parquet": "markdown"}  # link artifacts are stored (and shown) as markdown
LABEL = {"label-progress": "progress", "label-samples": "table", "label-summary": "markdown",
         "label-distribution": "image", "label-pairs-parquet": "markdown"}


def screenshot_dir() -> Path:
    folder = Path(os.environ.get("STSGEN_TEST_OUTPUTS") or PROJECT / "data" / "outputs" / "test-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_deployment(settings, name: str, params: dict) -> str:
    """`prefect deployment run NAME --params JSON --watch`; returns the flow run id it printed."""
    run = prefect_cli(settings, "deployment", "run", name, "--params", json.dumps(params), "--watch", timeout=300)
    assert run.returncode == 0 and "Completed" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    found = re.search(r"UUID: ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})", run.stdout)
    assert found, run.stdout[-3000:]
    return found.group(1)


def hand_made_contexts(triples: Path, path: Path) -> Path:
    """A contexts.parquet (stage-2 layout) giving every sentence of the triples three ranked contexts."""
    from tasks.contracts import sentence_id

    pool = ["the river flooded the lower town .", "residents moved cattle to the hills .",
            "the council opened the school .", "engineers inspected the old stone bridge .",
            "the orchestra played a new symphony .", "farmers planted wheat early ."]
    table = pq.read_table(triples)
    sentences = sorted({s for column in ("anchor", "positive", "intermediate", "negative")
                        for s in table.column(column).to_pylist() if s})
    rows = [{"sentence_id": sentence_id(s), "context_id": (n + rank) % (len(pool) - 1),
             "left": pool[(n + rank) % (len(pool) - 1)], "right": pool[(n + rank) % (len(pool) - 1) + 1],
             "rank": rank} for n, s in enumerate(sentences) for rank in range(3)]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


class Browser:
    def __init__(self, page, ui: str, folder: Path):
        self.page, self.ui, self.folder, self.shots = page, ui, folder, []

    def shoot(self, name: str) -> Path:
        path = self.folder / f"{name}.png"
        height = max(VIEWPORT["height"], min(int(self.page.evaluate(CONTENT_HEIGHT)), 8000))
        self.page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
        try:
            self.page.screenshot(path=str(path), full_page=True)
        finally:
            self.page.set_viewport_size(VIEWPORT)
        self.shots.append(path)
        print(f"screenshot: {path}")
        return path

    def open_flow_run_artifacts(self, flow_run_id: str, flow_name: str, expected: dict[str, str]):
        """The flow run's page, then its Artifacts tab: one card per expected key, showing its type."""
        page = self.page
        page.goto(f"{self.ui}/runs/flow-run/{flow_run_id}")
        page.get_by_text(flow_name, exact=True).first.wait_for()  # the SPA rendered the run (its flow link)
        sync_api.expect(page.get_by_text("Completed", exact=True).first).to_be_visible()
        self.artifacts_tab()
        for key, kind in expected.items():
            card = self.card(key)
            sync_api.expect(card).to_have_count(1)
            sync_api.expect(card).to_be_visible()
            self.expect_type(card, kind)

    def artifacts_tab(self) -> None:
        self.page.get_by_role("tablist").get_by_text("Artifacts", exact=True).click()
        sync_api.expect(self.page.locator(".artifact-card").first).to_be_visible()

    def back_to_artifacts_tab(self) -> None:
        """The browser's Back button, to the flow run's page; then its Artifacts tab again."""
        self.page.go_back()
        self.page.wait_for_url(re.compile(r"/runs/flow-run/"))
        self.artifacts_tab()

    @staticmethod
    def expect_type(card, kind: str) -> None:
        """The card's type line (lowercase in the DOM, upper-cased by CSS)."""
        sync_api.expect(card.locator(".artifact-card__subheader")).to_have_text(kind, ignore_case=True)

    def card(self, key: str):
        return self.page.locator(".artifact-card").filter(has=self.page.get_by_text(key, exact=True))

    def open_card(self, key: str) -> None:
        """Click an artifact card of the open Artifacts tab: the artifact's page, with its content."""
        self.card(key).click()
        self.page.wait_for_url(re.compile(r"/artifacts/artifact/[0-9a-f-]{36}"))
        sync_api.expect(self.page.locator(".artifact-data-view")).to_be_visible()


def check_ui(base_url: str, generate_id: str, label_id: str, anchors: list[str]) -> list[Path]:
    """Headless Chromium through the UI of the server at base_url; returns the screenshots taken."""
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(TIMEOUT_MS)
        sync_api.expect.set_options(timeout=TIMEOUT_MS)
        ui = Browser(page, base_url, screenshot_dir())
        try:
            # Stage 1: the run's Artifacts tab, then each stage artifact's page.
            ui.open_flow_run_artifacts(generate_id, "generate-sts-triples", GENERATE)
            ui.shoot("01-generate-flow-run-artifacts")

            ui.open_card("generate-progress")
            sync_api.expect(page.get_by_text("Progress: 100%")).to_be_visible()
            ui.shoot("02-generate-progress")

            ui.back_to_artifacts_tab()
            ui.open_card("generate-samples")
            table = page.locator(".artifact-data-view table")
            sync_api.expect(table).to_be_visible()
            sync_api.expect(table.locator("th", has_text="anchor").first).to_be_visible()
            for anchor in anchors:
                sync_api.expect(table.get_by_text(anchor, exact=True).first).to_be_visible()
            ui.shoot("03-generate-samples-table")

            ui.back_to_artifacts_tab()
            ui.open_card("generate-summary")
            sync_api.expect(page.get_by_role("heading", name=re.compile(
                r"generate-sts-triples — 4 triples from \d+ source sentences"))).to_be_visible()
            sync_api.expect(page.locator(".artifact-data-view table").get_by_text("positive", exact=True)
                            ).to_be_visible()
            ui.shoot("04-generate-summary-markdown")

            # Stage 3: its Artifacts tab, the summary, and the plot rendered from its data: URL.
            ui.open_flow_run_artifacts(label_id, "label-pairs", LABEL)
            ui.shoot("05-label-flow-run-artifacts")

            ui.open_card("label-summary")
            sync_api.expect(page.get_by_role("heading", name=re.compile(r"label-pairs — \d+ labeled pairs"))
                            ).to_be_visible()

            ui.back_to_artifacts_tab()
            ui.open_card("label-distribution")
            image = page.locator(".artifact-data-view img[src^='data:image/png;base64,']")
            sync_api.expect(image).to_have_count(1)
            sync_api.expect(image).to_be_visible()
            page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
            width, height = image.evaluate("img => [img.naturalWidth, img.naturalHeight]")
            assert width > 100 and height > 100, (width, height)
            ui.shoot("06-label-distribution-image")

            # The artifacts list: the latest artifact of every key, from both runs.
            page.goto(f"{base_url}/artifacts")
            for key, kind in {**GENERATE, **LABEL}.items():
                card = ui.card(key)
                sync_api.expect(card).to_have_count(1)
                sync_api.expect(card).to_be_visible()
                ui.expect_type(card, kind)
            ui.shoot("07-artifacts-list")
        except Exception:
            try:
                ui.shoot("failure")
            except Exception as exc:  # the original failure matters more
                print(f"no failure screenshot: {exc}")
            raise
        finally:
            browser.close()
    return ui.shots


def test_ui_shows_stage_artifacts(shared_stack, adhoc_generate_run, tiny_lm_dir, tmp_path):
    settings, info, _ = shared_stack
    out, generate_id = adhoc_generate_run["out"], adhoc_generate_run["flow_run_id"]
    triples_path = (out / "latest").resolve() / "generate-sts-triples" / "triples.parquet"
    triples = pq.read_table(triples_path)
    assert triples.num_rows == 4
    contexts = hand_made_contexts(triples_path, tmp_path / "contexts.parquet")
    # λ1 = 0: no coherence model needed; the LM terms come from the tiny causal LM.
    label_out = tmp_path / "outputs"
    label_id = run_deployment(settings, "label-pairs/label-adhoc", {
        "triples": str(triples_path), "contexts": str(contexts), "output_dir": str(label_out),
        "settings": {"method": "context", "lm": str(tiny_lm_dir), "lambda_disc": 0.0, "contexts_per_sentence": 3,
                  "reference_sentences": 0}})
    assert (label_out / "latest" / "label-pairs" / "label_distribution.png").read_bytes()[:4] == b"\x89PNG"

    shots = check_ui(info["ui"], generate_id, label_id, triples.column("anchor").to_pylist())
    assert len(shots) == 7, shots
