"""Peak RSS of importing a big OTLP file and a big chunked Inspect sample, against a small one
(issue 41: flat memory means the big import's peak within 20% of the small one's).

    .venv/bin/python bench/flat_memory_bench.py            # 100,000 spans and 100,000 events vs 1,000
    .venv/bin/python bench/flat_memory_bench.py --quick    # 2,000 vs 1,000: a smoke run of the same path

The files come from the real producers: the OTLP trace from opentelemetry-sdk's own encoder
(one trace of GenAI chat spans under an agent span, written as OTLP/JSON), the Inspect log
from inspect_ai (a mockllm sample's events repeated, written by `write_eval_log`, then turned
into chunks of 1,000 events by inspect_ai's own converter). Each import runs in a fresh child
process on an empty SQLite database, so the peak (VmHWM) is its own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from database import setup_django, timed_import  # bench/: this folder is on sys.path when run as a script
from timing import peak_rss_kb

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
FLAT = 1.20  # the big import's peak may be at most 20% above the small one's


def otlp_file(path: Path, spans: int) -> Path:
    """One trace: an agent span and `spans - 1` chat spans under it, each with its GenAI usage."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "flat-memory-bench"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    with tracer.start_as_current_span("invoke_agent bench", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for number in range(spans - 1):
            attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "bench-model",
                "gen_ai.usage.input_tokens": 100 + number % 7,
                "gen_ai.usage.output_tokens": 20,
            }
            with tracer.start_as_current_span("chat bench-model", attributes=attributes):
                pass
    path.write_text(MessageToJson(encode_spans(exporter.get_finished_spans())))
    provider.shutdown()
    return path


def inspect_chunked_log(folder: Path, events: int) -> Path:
    """A log of one sample holding `events` events (a mockllm sample's, repeated with new ids),
    in chunks of 1,000 as inspect_ai's converter writes them."""
    from inspect_ai.log import read_eval_log, write_eval_log
    from inspect_ai.log._recorders.chunked.convert import convert_eval_logs_to_chunked

    setup_django(folder / "writer")  # (tests.inspect_logs reads trials.models: Django first; the child's own)
    from tests.inspect_logs import write_agentic_log

    whole = read_eval_log(str(write_agentic_log(folder / "source")))
    sample = next(s for s in whole.samples or [] if s.id == "loop")
    pattern = [e for e in sample.events if e.event in ("model", "tool")]
    repeated = []
    while len(repeated) < events:
        for event in pattern[: events - len(repeated)]:
            repeated.append(event.model_copy(update={"uuid": uuid.uuid4().hex}))
    sample.events = repeated
    whole.samples = [sample]
    whole.results = None
    big = folder / "big" / "big.eval"
    big.parent.mkdir(parents=True)
    write_eval_log(whole, str(big))
    convert_eval_logs_to_chunked(str(big), str(folder / "chunked"), chunk_size=1000)
    return next((folder / "chunked").glob("*.eval"))


def child_import(source: Path, data_dir: Path) -> dict:
    setup_django(data_dir)
    from trials.models import Step, Trial

    imp, seconds = timed_import(source)
    assert imp.status == "done", imp.problems
    return {"seconds": seconds, "trials": Trial.objects.count(), "steps": Step.objects.count()}


def measure(tmp: Path, kind: str, size: int) -> dict:
    folder = tmp / f"{kind}-{size}"
    folder.mkdir()
    source = otlp_file(folder / "trace.json", size) if kind == "otlp" else inspect_chunked_log(folder, size)
    data_dir = folder / "db"
    data_dir.mkdir()
    command = [sys.executable, __file__, "--child", str(source), str(data_dir)]
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=REPO)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "file": "OTLP spans" if kind == "otlp" else "Inspect chunked events",
        "items": size,
        "file_MB": round(source.stat().st_size / 1e6, 1),
        "steps": result["steps"],
        "import_s": round(result["seconds"], 1),
        "peak_rss_MB": round(result["peak_rss_kb"] / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("SOURCE", "DATA_DIR"))
    args = parser.parse_args()
    if args.child:
        result = child_import(Path(args.child[0]), Path(args.child[1]))
        result["peak_rss_kb"] = peak_rss_kb()
        print(json.dumps(result))
        return
    big = 2_000 if args.quick else 100_000
    with tempfile.TemporaryDirectory(prefix="flat-memory-bench-") as tmp:
        for kind in ("otlp", "inspect"):
            small, large = measure(Path(tmp), kind, 1000), measure(Path(tmp), kind, big)
            ratio = large["peak_rss_MB"] / small["peak_rss_MB"]
            for row in (small, large):
                print(json.dumps(row))
            print(json.dumps({"file": small["file"], "peak_ratio": round(ratio, 2), "flat": ratio <= FLAT}))


if __name__ == "__main__":
    main()
