"""Test environment: isolated Prefect home and stsgen home, no telemetry, Prefect's test harness (ephemeral API).

Environment variables are set before Prefect is imported anywhere (pytest loads conftest first)."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# One torch thread policy for the whole suite, here only: the caller's OMP_NUM_THREADS (read by the first process:
# xdist's workers and children inherit the value set below), else the cores shared out among the xdist workers (2
# workers with a thread per core each slow a tiny model's training loop 5x to 100x on 2 cores). Put back around every
# test (`torch_threads_policy`): a test that left 2 threads behind made later float results depend on test order.
os.environ.setdefault("STSGEN_TEST_THREADS_GIVEN", os.environ.get("OMP_NUM_THREADS", ""))
TORCH_THREADS = int(os.environ["STSGEN_TEST_THREADS_GIVEN"] or max(1, (os.cpu_count() or 1) // int(
    os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
os.environ.update(OMP_NUM_THREADS=str(TORCH_THREADS), MKL_NUM_THREADS=str(TORCH_THREADS))

if os.environ.get("STSGEN_TEST_CHILD") != "1":  # a test's child process keeps the environment its test gave it
    _ROOT = Path(tempfile.mkdtemp(prefix="stsgen-tests-"))
    atexit.register(shutil.rmtree, _ROOT, ignore_errors=True)  # the isolated homes go with the session
    os.environ.pop("PREFECT_API_URL", None)
    os.environ.update(
        PREFECT_HOME=str(_ROOT / "prefect"),
        STSGEN_HOME=str(_ROOT / "stsgen"),
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT="false",
        PREFECT_LOGGING_LEVEL="WARNING",
        # Child processes (flows, CLI) start their own ephemeral API; Prefect's 20 s start-up limit fails them on a
        # busy 2-core CI machine while a fresh SQLite database is migrated.
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
    )

import pytest  # noqa: E402

PROJECT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT.parent / "shared" / "data"
sys.path.insert(0, str(PROJECT))

from tasks.llm.scripted_server import ScriptedOpenAI  # noqa: E402

# Session fixtures that cost a minute each: with pytest-xdist (`./stsgen test` runs 2 workers, --dist loadgroup) the
# tests that use one run on one worker, so it is built once.
# The SmolLM2 GGUF loaded by transformers (~45 s: it re-parses the file for config, tokenizer and weights) is cached
# per process (tasks/label/scorer.cached_lm): its two modules share one worker and one load.
XDIST_GROUPS = {"shared_stack": "stack", "adhoc_generate_run": "stack", "reference_run": "faults",
                "smollm2_server": "smollm2", "scorers": "smollm2"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the marks to group the items
def pytest_collection_modifyitems(config, items):
    if os.environ.get("STSGEN_TEST_REVERSE") == "1":  # opt-in: the items in reverse order (an order-dependence check)
        items.reverse()
    for item in items:
        fixtures = getattr(item, "fixturenames", ())  # direct and through other fixtures
        group = [pytest.mark.xdist_group(g) for f, g in XDIST_GROUPS.items() if f in fixtures][:1]
        for mark in group + ([pytest.mark.prefect] if "prefect_harness" in fixtures else []):  # (mutmut leaves out)
            item.add_marker(mark)


@pytest.fixture(scope="session", autouse=True)
def groups_stay_on_one_worker(request):
    """Under --dist loadgroup a grouped item's node id carries its group ("…@faults"); without it the item is scheduled
    alone and its session fixture built on every worker. Fail every test at once, naming why, rather than silently
    doubling the suite's slowest setups."""
    if not getattr(request.config.option, "loadgroup", False):  # set on xdist workers only
        return
    lost = [item.nodeid for item in request.session.items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        pytest.fail(f"--dist loadgroup is not grouping ({len(lost)} items, e.g. {lost[0]}): this pytest and "
                    f"pytest-xdist do not work together (pyproject.toml pins a pair that does)", pytrace=False)


def policy_threads() -> None:
    """torch's threads back to the suite's (a model loaded with its own `threads` changes them: load_causal_lm)."""
    if (torch := sys.modules.get("torch")) is not None and torch.get_num_threads() != TORCH_THREADS:
        torch.set_num_threads(TORCH_THREADS)  # torch never imported: nothing to set


@pytest.fixture(autouse=True)
def torch_threads_policy():
    """Every test starts and ends at the suite's thread count, whatever a fixture, a library or a test set."""
    policy_threads()
    yield
    policy_threads()


SERVER_COMMANDS = ("prefect.server.api.server", "llama-server", "llama_cpp.server", "prefect worker")


def _proc(pid: int | str, name: str) -> bytes:
    with open(f"/proc/{pid}/{name}", "rb") as fh:
        return fh.read()


def _started_in_session(pid: int | str, marker: str) -> bool:
    """Whether a process's start environment holds the session's marker; a process whose environment cannot be read
    (gone, pid 0, or another user's / non-dumpable, as a sandbox's reaper can be) is not one the session started."""
    try:
        return marker.encode() in _proc(pid, "environ")
    except OSError:
        return False


def servers_left_behind(marker: str) -> list[str]:
    """Server processes this session started (their environment holds the session's temporary home `marker`) whose
    parent is gone: reparented to init, to a subreaper, or to any process outside the session."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmd = _proc(entry.name, "cmdline").replace(b"\0", b" ").decode(errors="replace")
            if not any(c in cmd for c in SERVER_COMMANDS) or not _started_in_session(entry.name, marker):
                continue
            state, ppid = _proc(entry.name, "stat").decode().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue  # the process ended while being read
        # /proc/<pid>/environ is the environment a process started with: this process (which set the marker after it
        # started) is recognised by its pid.
        parent_ours = int(ppid) == os.getpid() or (int(ppid) > 1 and _started_in_session(ppid, marker))
        if state != "Z" and not parent_ours:
            found.append(f"{entry.name}: {cmd[:160]}")
    return found


@pytest.fixture(scope="session", autouse=True)
def no_server_left_behind():
    """The suite leaves no server running: checked after every other session fixture has stopped what it started
    (killed children's servers die with them: tasks/core/prefect_ephemeral.py, tasks/llm/server.py)."""
    yield
    if os.environ.get("STSGEN_TEST_CHILD") == "1" or not sys.platform.startswith("linux"):
        return
    import signal
    import time

    deadline = time.time() + 20  # a server that got its parent-death SIGTERM shuts down gracefully
    while (left := servers_left_behind(str(_ROOT))) and time.time() < deadline:
        time.sleep(0.5)
    for line in left:
        with contextlib.suppress(OSError):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
    assert not left, "servers left running with no parent by this test session:\n" + "\n".join(left)


@pytest.fixture(scope="session")
def prefect_harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def child_env(tmp_path_factory, prefect_harness) -> dict:
    """Environment of pipeline child processes: their own Prefect home, and the session's test API server (one
    server for every child: starting an ephemeral one per child costs ~10 s each on 2 cores)."""
    from prefect.settings import PREFECT_API_URL

    return dict(os.environ, PREFECT_HOME=str(tmp_path_factory.mktemp("fault-prefect")),
                PREFECT_API_URL=PREFECT_API_URL.value())


def latest_artifacts() -> dict:
    """The newest artifact of each key. Tests run one flow at a time, so these are the last flow run's; reading all
    artifacts unsorted would mix in an earlier test's run of the same flow (same keys)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        newest_first = client.read_artifacts(sort=ArtifactSort.CREATED_DESC)
    artifacts: dict = {}
    for artifact in newest_first:
        if artifact.key:
            artifacts.setdefault(artifact.key, artifact)
    return artifacts


@pytest.fixture
def run_logs_at_info(monkeypatch):
    """Flow and task runs send their INFO lines to the API (the suite runs Prefect at WARNING to keep logs short).
    Set through Prefect's logging-config environment overrides, which every later `setup_logging` keeps."""
    from prefect.logging.configuration import setup_logging

    for name in ("FLOW_RUNS", "TASK_RUNS"):
        monkeypatch.setenv(f"PREFECT_LOGGING_LOGGERS_PREFECT_{name}_LEVEL", "INFO")
    setup_logging()
    yield
    monkeypatch.undo()
    setup_logging()


def latest_run_logs(flow_name: str) -> list[str]:
    """The log messages (its tasks' included) of the newest run of flow `flow_name`, as the Prefect UI shows them."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName, LogFilter, LogFilterFlowRunId
    from prefect.client.schemas.sorting import FlowRunSort, LogSort
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=30)  # logs are shipped to the API in batches
    with get_client(sync_client=True) as client:
        run = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
                                    sort=FlowRunSort.START_TIME_DESC, limit=1)[0]
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])), sort=LogSort.TIMESTAMP_ASC)
    return [log.message for log in logs]


@pytest.fixture
def scripted():
    with ScriptedOpenAI() as server:
        yield server


@contextlib.contextmanager
def running_stack(folder: Path):
    """A real local stack (flows/stack.py): Prefect server (SQLite), process work pool, the prefect.yaml deployments
    and a worker, against the scripted LLM server; yields (settings, info, llm) and stops everything after."""
    from flows import stack
    from tasks.llm.server import free_port

    with ScriptedOpenAI() as llm, pytest.MonkeyPatch.context() as patch:
        # Read by the worker when it starts (its flow-run processes inherit them); restored for the rest of the session.
        patch.setenv("PREFECT_WORKER_QUERY_SECONDS", "2")
        patch.setenv("STSGEN_HOME", str(folder / "stsgen-home"))  # the worker's LLM cache starts empty
        settings = stack.StackSettings(prefect_port=free_port(), llm_base_url=llm.base_url,
                                       llm_model="scripted-model", home=folder / "home")
        try:
            info = stack.up(settings)
            patch.undo()
            yield settings, info, llm
        finally:
            stopped = stack.down(settings)
            assert "worker" in stopped and "prefect-server" in stopped


@pytest.fixture(scope="session")
def shared_stack(tmp_path_factory):
    """One local stack for the session (the Prefect restart fault test, deployments, the UI): starting one costs
    ~50 s on 2 cores."""
    with running_stack(tmp_path_factory.mktemp("shared-stack")) as running:
        yield running


@pytest.fixture(scope="session")
def adhoc_generate_run(shared_stack, tmp_path_factory) -> dict:
    """`prefect deployment run generate-sts-triples/adhoc -p settings='{"n": 4, …}' … --watch` on the shared stack,
    once per session: its stdout, flow run id, output folder, corpus and the LLM requests it sent."""
    import json
    import re

    settings, _, llm = shared_stack
    corpus = write_tiny_corpus(tmp_path_factory.mktemp("adhoc-corpus"))
    out = tmp_path_factory.mktemp("adhoc-outputs")
    sent_before = len(llm.chat_requests())
    stage_settings = json.dumps({"n": 4, "corpus": {"source": str(corpus)}})
    run = prefect_cli(settings, "deployment", "run", "generate-sts-triples/adhoc", "-p", f"settings={stage_settings}",
                      "-p", f"output_dir={out}", "--watch", timeout=300)
    assert run.returncode == 0 and "Completed" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    found = re.search(r"UUID: ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})", run.stdout)
    assert found, run.stdout[-3000:]
    return {"stdout": run.stdout, "flow_run_id": found.group(1), "out": out, "corpus": corpus,
            "requests": llm.chat_requests()[sent_before:]}


def prefect_cli(settings, *args, timeout=240) -> subprocess.CompletedProcess:
    """The `prefect` CLI of this virtualenv against the local stack of `settings`, from the project folder."""
    from flows import stack

    exe = Path(sys.executable).with_name("prefect")
    return subprocess.run([str(exe), *args], env=stack.prefect_env(settings), cwd=PROJECT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def tiny_corpus(tmp_path) -> Path:
    """A folder of three small text documents (one document per file)."""
    return write_tiny_corpus(tmp_path)


def write_tiny_corpus(parent: Path) -> Path:
    folder = parent / "corpus"
    folder.mkdir()
    texts = {
        "a.txt": "The river flooded the lower town after three days of heavy rain. Residents moved their cattle to "
                 "the hills before the water arrived. The council opened the school as a shelter for families.\n\n"
                 "Engineers inspected the old stone bridge on Monday morning. They found deep cracks in two arches.",
        "b.txt": "The orchestra performed the new symphony for the first time in the capital. Critics praised the "
                 "second movement for its quiet strings. The composer thanked the musicians after the final note.",
        "c.txt": "Farmers in the valley planted wheat earlier than usual this spring. A warm winter left the soil "
                 "dry and easy to work. Prices for seed rose sharply in the local markets during March.",
    }
    for name, text in texts.items():
        (folder / name).write_text(text)
    return folder


WORDS = ("the river flooded lower town after rain residents moved cattle to hills council opened school shelter "
         "engineers inspected old stone bridge found cracks orchestra played new symphony critics praised strings "
         "farmers planted wheat early spring prices rose markets a an of in on and was were . ,").split()


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer Llama with a word-level tokenizer, saved as a transformers folder."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "<s>", "</s>", *dict.fromkeys(WORDS)])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    folder = tmp_path_factory.mktemp("tiny-lm")
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                            pad_token="</s>").save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         bos_token_id=1, eos_token_id=2,
                         initializer_range=0.3)  # sharp attention: position or mask slips move log-probs a lot
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


TOPICS = {
    "river": ["The river flooded the lower town after the heavy rain.",
              "Residents moved their cattle to the hills before the water rose.",
              "The council opened the old school as a shelter for the families.",
              "Engineers inspected the stone bridge over the river on Monday.",
              "They found deep cracks in two arches of the old bridge.",
              "The water left mud in every street of the lower town."],
    "music": ["The orchestra performed the new symphony in the capital last night.",
              "Critics praised the quiet strings of the second movement.",
              "The composer thanked the musicians after the final note.",
              "The hall was full of students and families for the concert.",
              "The conductor asked the strings to play the movement again.",
              "The new symphony will be performed again in the spring."],
    "farm": ["Farmers in the valley planted their wheat early this spring.",
             "A warm winter left the soil dry and easy to work.",
             "Prices for seed rose sharply in the local markets during March.",
             "The farmers moved their cattle to the hills for the summer.",
             "Rain in April helped the young wheat in the valley.",
             "The markets in town sold the wheat at a good price."],
}


@pytest.fixture
def topic_corpus(tmp_path) -> Path:
    return write_topic_corpus(tmp_path / "topics")


def write_topic_corpus(folder: Path) -> Path:
    """Nine documents of six sentences, each mixing two of three topics: enough shared vocabulary that every
    topical sentence screens several contexts from different documents."""
    folder.mkdir(parents=True)
    names = list(TOPICS)
    for d in range(9):
        first, second = TOPICS[names[d % 3]], TOPICS[names[(d + 1 + d // 3) % 3]]
        lines = [first[(d + i) % 6] if i % 2 == 0 else second[(d + 2 * i) % 6] for i in range(6)]
        (folder / f"doc{d}.txt").write_text(" ".join(lines))
    return folder


@pytest.fixture(scope="session")
def tiny_encoder_dir(tiny_lm_dir, tmp_path_factory) -> Path:
    """A randomly initialised 2-layer BERT sharing the tiny word-level tokenizer, saved as a transformers folder."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(tiny_lm_dir)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=128)
    folder = tmp_path_factory.mktemp("tiny-bert")
    BertModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def shared(path: str) -> Path:
    target = SHARED_DATA / path
    if not target.exists():
        pytest.skip(f"../shared/data/{path} is not on this machine")
    return target


def generate_settings(corpus, **fields):
    """Stage 1's settings for a test: `corpus` a path (str or Path), the other fields as GenerateSettings takes them
    (n, seed, pattern, sampling, validation, verifier, max_attempts, batch_size, avoid_used_sources)."""
    from tasks.core.config import CorpusSettings
    from tasks.generate.settings import GenerateSettings

    return GenerateSettings(corpus=CorpusSettings(source=str(corpus)), **fields)
