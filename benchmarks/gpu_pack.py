"""Pack what benchmarks/gpu_check.sh recorded so far into the few files a lent GPU machine
returns: at most 8 files, 16 MiB each, at most 2 folders below $OUT (docs/gpu-run.md).

    python benchmarks/gpu_pack.py WORK OUT        WORK -> OUT/gpu-check.tar.gz, OUT/summary.json
    python benchmarks/gpu_pack.py --verdict OUT/summary.json      exit 1 if a step failed

gpu_check.sh calls it after every step, so a kill at any moment leaves in OUT everything
finished before it. It reads the run directories and JSON documents as plain JSON with the
standard library only: the pack must work even where the carried wheels did not install.
Each headline figure is {"value", "unit", "reason"}: a value, or null with the reason.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STEPS = ("install", "captures", "check", "diagnose", "nccl", "burnin")
BRINGUP_STEPS = ("check", "diagnose", "nccl", "burnin")
# The probe each bringup step is there for: the step ran when it answered.
MAIN_PROBE = {"check": "gpu", "diagnose": "gemm", "nccl": "nccl", "burnin": "burnin"}
TARBALL = "gpu-check.tar.gz"
SUMMARY = "summary.json"
MAX_TAR_BYTES = 15 * 1024 * 1024  # a returned file must stay under 16 MiB
SKIPPED_DIRS = {"site", "checkpoints", "work"}  # the installed wheels, the trainer's scratch
TIMED_OUT = {124, 137}  # timeout(1): the step ran out of time (137: after kill-after)

Figure = dict[str, Any]


def figure(value: Any, unit: str | None, reason: str | None = None) -> Figure:
    if value is None and reason is None:
        reason = "not measured"
    return {"value": value, "unit": unit, "reason": None if value is not None else reason}


def missing(unit: str | None, reason: str) -> Figure:
    return figure(None, unit, reason)


def per_gpu_figure(values: list[float | None], unit: str, reason: str) -> Figure:
    """A figure per GPU: null (with the reason) when no GPU has one."""
    return figure(values if any(v is not None for v in values) else None, unit, reason)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(errors="replace"))
    except (OSError, ValueError):
        return None


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


# --- the steps ------------------------------------------------------------------------------


def read_steps(work: Path) -> dict[str, dict[str, Any]]:
    """steps.txt (label, exit code, seconds, budget per line) with each step's verdict."""
    ran: dict[str, dict[str, Any]] = {}
    for line in _text(work / "steps.txt").splitlines():
        parts = line.split()
        if len(parts) != 4:
            continue
        label, code, seconds, budget = parts
        ran[label] = {
            "exit": int(code) if code.lstrip("-").isdigit() else code,
            "seconds": int(seconds) if seconds.isdigit() else None,
            "budget_s": int(budget) if budget.lstrip("-").isdigit() else None,
        }
    steps: dict[str, dict[str, Any]] = {}
    for label in STEPS:
        if label not in ran:
            steps[label] = {"status": "pending", "reason": "not run (yet, or the run was killed)"}
            continue
        step = ran[label]
        reason = step_failure(label, step, work)
        status = "skipped" if step["exit"] == "skipped" else "failed" if reason else "ok"
        steps[label] = {**step, "status": status, "reason": reason}
    return steps


def step_failure(label: str, step: dict[str, Any], work: Path) -> str | None:
    """Why a step failed, or None. A bringup exit of 1 is a verdict (a finding that is not
    PASS on this machine), not a failure of the step: no document, or no answer from the
    probe the step is there for, is."""
    code = step["exit"]
    if code == "skipped":
        return f"skipped: {step['budget_s']} s left of the call's time"
    if code == 127:
        return "exit 127: command not found"
    if code in TIMED_OUT:
        return f"timed out after {step['budget_s']} s: interrupted, what finished is kept"
    if label not in BRINGUP_STEPS:
        return None if code == 0 else f"exit {code}"
    doc = _json(work / "runs" / f"{label}.json")
    if not isinstance(doc, dict) or "exit_code" not in doc:
        return f"exit {code} and no JSON document"
    if code not in (0, 1):
        return f"exit {code}: {doc.get('error') or 'see its stderr in the tarball'}"
    manifest = _json(work / "runs" / label / "manifest.json")
    if isinstance(manifest, dict) and manifest.get("status") == "interrupted":
        return "interrupted: what finished is kept"
    facts, why = _probe_facts(work, label, MAIN_PROBE[label])
    if facts is None:
        return why
    if facts.get("error"):  # the burn-in: the trainer did not finish
        return f"the {MAIN_PROBE[label]} probe: {facts['error']}"
    return None


# --- the headline figures -------------------------------------------------------------------


def node_probe(work: Path, label: str, probe: str) -> dict[str, Any] | None:
    """The probe record of the one node of a step's run directory."""
    for path in sorted((work / "runs" / label / "facts").glob("*.json")):
        doc = _json(path)
        record = doc.get("probes", {}).get(probe) if isinstance(doc, dict) else None
        if isinstance(record, dict):
            return record
    return None


def _probe_facts(work: Path, label: str, probe: str) -> tuple[dict[str, Any] | None, str]:
    """(facts, None) or (None, why there are none)."""
    record = node_probe(work, label, probe)
    if record is None:
        return None, f"no {probe} record: the {label} step did not finish"
    facts = record.get("facts")
    if not record.get("ok") or not isinstance(facts, dict):
        return None, f"the {probe} probe failed: {record.get('error') or 'no facts'}"
    return facts, ""


def peaks(profile: str | None, repo: Path) -> dict[str, float]:
    """The profile's dense peaks in TFLOP/s (bf16, fp8), where it names them."""
    if not profile or not re.fullmatch(r"[a-z0-9]+", profile):
        return {}
    try:
        import yaml

        gpu = yaml.safe_load(_text(repo / "checks" / "profiles" / f"{profile}.yaml"))["gpu"]
    except Exception:  # no PyYAML, no such profile: % of peak says why it is missing
        return {}
    found = {
        "bf16": gpu.get("bf16_dense_tflops"),
        "fp8": gpu.get("fp8_dense_tflops"),
    }
    return {k: float(v) for k, v in found.items() if isinstance(v, int | float)}


def gemm_figures(work: Path, profile: str | None, repo: Path) -> dict[str, Figure]:
    facts, why = _probe_facts(work, "diagnose", "gemm")
    names = (
        "gemm_bf16_tflops",
        "gemm_bf16_pct_of_peak",
        "gemm_fp8_tflops",
        "gemm_fp8_pct_of_peak",
        "gemm_bf16_sustained_tflops",
        "hbm_gb_s",
    )
    units = ("TFLOP/s", "%", "TFLOP/s", "%", "TFLOP/s", "GB/s")
    if facts is None:
        return {n: missing(u, why) for n, u in zip(names, units, strict=True)}
    if facts.get("device") != "cuda":
        why = f"measured on the {facts.get('device')}, not a GPU: its figures are in the tarball"
        return {n: missing(u, why) for n, u in zip(names, units, strict=True)}
    gpus = [g for g in facts.get("gpus") or [] if isinstance(g, dict)]
    top = peaks(profile, repo)

    def per_gpu(key: str, scale: float) -> list[float | None]:
        return [round(g[key] / scale, 1) if g.get(key) else None for g in gpus]

    def of_peak(values: list[float | None], dtype: str) -> Figure:
        if dtype not in top:
            return missing("%", f"no {dtype} peak in the profile '{profile}'")
        shares = [round(100 * v / top[dtype], 1) if v else None for v in values]
        return per_gpu_figure(shares, "%", f"no {dtype} figure")

    bf16 = per_gpu("bf16_flops_per_s", 1e12)
    fp8 = per_gpu("fp8_flops_per_s", 1e12)
    fp8_why = next((g.get("fp8_error") for g in gpus if g.get("fp8_error")), None)
    return {
        "gemm_bf16_tflops": per_gpu_figure(bf16, "TFLOP/s", "no bf16 figure"),
        "gemm_bf16_pct_of_peak": of_peak(bf16, "bf16"),
        "gemm_fp8_tflops": per_gpu_figure(fp8, "TFLOP/s", fp8_why or "no fp8 figure"),
        "gemm_fp8_pct_of_peak": of_peak(fp8, "fp8"),
        "gemm_bf16_sustained_tflops": per_gpu_figure(
            per_gpu("sustained_bf16_flops_per_s", 1e12), "TFLOP/s", "no sustained phase"
        ),
        "hbm_gb_s": per_gpu_figure(per_gpu("hbm_bytes_per_s", 1e9), "GB/s", "no copy timed"),
    }


def telemetry_figures(work: Path) -> dict[str, Figure]:
    """The maxima of the diagnose step's NVML timeline (the load ran under it)."""
    fields = {
        "telemetry_max_sm_clock_mhz": ("sm_clock_hz", 1e6, "MHz"),
        "telemetry_max_power_w": ("power_w", 1.0, "W"),
        "telemetry_max_temperature_c": ("temperature_c", 1.0, "°C"),
        "telemetry_max_memory_temperature_c": ("memory_temperature_c", 1.0, "°C"),
    }
    facts, why = _probe_facts(work, "diagnose", "gemm")
    timeline = (facts or {}).get("timeline")
    if facts is not None and not isinstance(timeline, dict):
        why = "the diagnose step recorded no timeline"
    elif facts is not None and timeline.get("error"):
        why = f"the NVML sampler failed: {timeline['error']}"
    if facts is None or why:
        result = {name: missing(unit, why) for name, (_, _, unit) in fields.items()}
        result["telemetry_clock_event_reasons"] = missing(None, why)
        return result
    samples = [s for s in timeline.get("samples") or [] if isinstance(s, dict)]
    result = {}
    for name, (key, scale, unit) in fields.items():
        values = [s[key] for s in samples if isinstance(s.get(key), int | float)]
        best = round(max(values) / scale, 1) if values else None
        result[name] = figure(best, unit, f"no {key} in {len(samples)} samples")
    reasons = sorted({r for s in samples for r in s.get("clock_event_reasons") or []})
    result["telemetry_clock_event_reasons"] = figure(reasons, None)
    return result


def nccl_figures(work: Path) -> dict[str, Figure]:
    facts, why = _probe_facts(work, "nccl", "nccl")
    if facts is None:
        return {"nccl_busbw_gb_s": missing("GB/s", why), "nccl_algbw_gb_s": missing("GB/s", why)}
    rows = [r for r in facts.get("rows") or [] if isinstance(r, dict)]
    largest = max(rows, key=lambda r: r.get("size_bytes") or 0, default={})
    algbw = largest.get("oop_algbw_bytes_per_s")
    backend = facts.get("backend")
    if backend != "nccl":
        why = f"ran on {backend} ({facts.get('version')}), not NCCL: its figures are in the tarball"
        return {"nccl_busbw_gb_s": missing("GB/s", why), "nccl_algbw_gb_s": missing("GB/s", why)}
    size = f"{(largest.get('size_bytes') or 0) / 2**20:g} MiB"
    algbw_figure = figure(round(algbw / 1e9, 1) if algbw else None, "GB/s", "no timed size")
    algbw_figure["at"] = size
    if (facts.get("nranks") or 0) < 2:
        why = "one rank: all_reduce moves no data between GPUs (bus factor 0); needs 2+ GPUs"
        return {"nccl_busbw_gb_s": missing("GB/s", why), "nccl_algbw_gb_s": algbw_figure}
    busbw = facts.get("largest_size_busbw_bytes_per_s")
    return {
        "nccl_busbw_gb_s": figure(round(busbw / 1e9, 1) if busbw else None, "GB/s"),
        "nccl_algbw_gb_s": algbw_figure,
    }


def burnin_figures(work: Path) -> dict[str, Figure]:
    names = {
        "burnin_tokens_per_s": "tokens/s",
        "burnin_mfu_pct": "%",
        "burnin_peak_memory_gib": "GiB",
    }
    baseline = _json(work / "runs" / "burnin" / "baseline.json")
    nodes = baseline.get("nodes") if isinstance(baseline, dict) else None
    node = nodes[0] if isinstance(nodes, list) and nodes and isinstance(nodes[0], dict) else None
    if node is None:
        _, why = _probe_facts(work, "burnin", "burnin")
        why = why or "the burn-in wrote no baseline.json"
        return {name: missing(unit, why) for name, unit in names.items()}
    if node.get("device_kind") != "cuda":
        why = (
            f"trained {node.get('recipe')} on the {node.get('device_kind')}, not a GPU: "
            "its figures are in the tarball"
        )
        return {name: missing(unit, why) for name, unit in names.items()}
    mfu = node.get("mfu")
    memory = [m for m in node.get("peak_memory_bytes") or [] if isinstance(m, int | float)]
    return {
        "burnin_tokens_per_s": figure(node.get("tokens_per_s_per_gpu"), "tokens/s"),
        "burnin_mfu_pct": figure(
            round(100 * mfu, 1) if isinstance(mfu, int | float) else None,
            "%",
            "no peak to compute MFU against",
        ),
        "burnin_peak_memory_gib": figure(round(max(memory) / 2**30, 1) if memory else None, "GiB"),
    }


def version_figures(work: Path) -> dict[str, Figure]:
    smi = _text(work / "raw" / "smi" / "nvidia-smi-q.txt")

    def from_q(label: str) -> str | None:
        found = re.search(rf"^\s*{label}\s*:\s*(\S.*?)\s*$", smi, re.MULTILINE)
        return found[1] if found else None

    versions = _json(work / "raw" / "versions.json")
    versions = versions if isinstance(versions, dict) else {}
    why = versions.get("error") or "no torch answer (raw/versions.json)"
    return {
        "gpu_name": figure(from_q("Product Name"), None, "not in nvidia-smi -q"),
        "driver_version": figure(from_q("Driver Version"), None, "not in nvidia-smi -q"),
        "cuda_driver_version": figure(from_q("CUDA Version"), None, "not in nvidia-smi -q"),
        "torch_version": figure(versions.get("torch"), None, why),
        "torch_cuda_version": figure(versions.get("torch_cuda"), None, "torch built without CUDA"),
        "nccl_version": figure(versions.get("nccl"), None, "no CUDA device for torch"),
        "python_version": figure(versions.get("python"), None, why),
    }


def not_recorded() -> dict[str, Figure]:
    """What this run cannot record, said in the summary rather than left out."""
    return {
        "p2p_gb_s": missing(
            "GB/s", "the p2p probe needs 2 GPUs: the lent machine has one (docs/gpu-run.md)"
        ),
    }


def summarize(work: Path, repo: Path) -> dict[str, Any]:
    steps = read_steps(work)
    profile = _text(work / "raw" / "profile.txt").strip() or None
    figures: dict[str, Figure] = {}
    groups = [
        lambda: version_figures(work),
        lambda: gemm_figures(work, profile, repo),
        lambda: telemetry_figures(work),
        lambda: nccl_figures(work),
        lambda: burnin_figures(work),
        not_recorded,
    ]
    for group in groups:
        try:
            figures.update(group())
        except Exception as exc:  # records of a shape not foreseen: the rest still counts
            figures[f"error_{len(figures)}"] = missing(None, f"{type(exc).__name__}: {exc}")
    failed = [label for label, s in steps.items() if s["status"] in ("failed", "skipped")]
    return {
        "kind": "bringup.gpu_check.summary",
        "profile": profile,
        "finished": all(s["status"] != "pending" for s in steps.values()),
        "failed_steps": failed,
        "steps": steps,
        "figures": figures,
    }


# --- the tarball ----------------------------------------------------------------------------


def members(work: Path) -> Iterator[Path]:
    """Every file worth keeping, smallest first (what a size cap drops are the largest)."""
    files = []
    for root, dirs, names in os.walk(work):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        files += [Path(root) / n for n in names]
    sizes = {}
    for path in files:
        try:
            sizes[path] = path.stat().st_size
        except OSError:
            continue
    yield from sorted(sizes, key=lambda p: (sizes[p], str(p)))


def write_tarball(work: Path, dest: Path, cap: int = MAX_TAR_BYTES) -> list[str]:
    """dest, written whole or not at all, under `cap` bytes; the files left out to stay
    under it (the largest), by path."""
    files = list(members(work))
    left_out: list[str] = []
    while True:
        partial = dest.with_name(f".{dest.name}.partial")
        with tarfile.open(partial, "w:gz") as tar:
            for path in files:
                try:
                    tar.add(path, arcname=str(path.relative_to(work)), recursive=False)
                except OSError:
                    continue  # gone meanwhile (a scratch file)
        if partial.stat().st_size <= cap or not files:
            os.replace(partial, dest)
            return left_out
        left_out.append(str(files.pop().relative_to(work)))


def pack(work: Path, out: Path, repo: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    left_out = write_tarball(work, out / TARBALL)
    summary = summarize(work, repo)
    summary["tarball"] = {"file": TARBALL, "left_out_for_size": left_out}
    partial = out / f".{SUMMARY}.partial"
    partial.write_text(json.dumps(summary, indent=2, ensure_ascii=True) + "\n")
    os.replace(partial, out / SUMMARY)
    return summary


def verdict(summary_path: Path) -> int:
    summary = _json(summary_path)
    if not isinstance(summary, dict):
        print(f"gpu_check: no summary at {summary_path}", file=sys.stderr)
        return 1
    failed = summary.get("failed_steps") or []
    for label in failed:
        print(f"gpu_check: {label} failed: {summary['steps'][label]['reason']}", file=sys.stderr)
    return 1 if failed or not summary.get("finished") else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--verdict":
        return verdict(Path(argv[1]))
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    pack(Path(argv[0]), Path(argv[1]), Path(__file__).resolve().parents[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
