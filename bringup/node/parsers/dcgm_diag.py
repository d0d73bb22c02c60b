"""Parse `dcgmi diag` output (DCGM's active diagnostic) into verdicts per test and per GPU.

Every layout `dcgmi diag` prints (DCGM's own source, `dcgmi/Diag.cpp` of NVIDIA/DCGM;
real outputs in tests/fixtures/dcgm/; docs/reference.md#dcgm-diagnostics):

- table, DCGM 2.x/3.x: one row per test with its verdict for every GPU at once
  ("Pass - All") or by GPU ("Pass - GPUs: 1, 2" then, in the next row, "Fail - GPU: 0");
  a deployment test has one verdict ("Pass"). Messages follow in rows labelled "Warning",
  "Error" or "Info", cut every 45 characters (mid-word too).
- table, DCGM 4.x: one row per test with its overall verdict, then one row per GPU
  ("GPU0: Pass"); messages labelled "Warning: GPU1" (one GPU) or "Warning" (the test).
  A GPU's own row prints "Fail" for a warning, so under a test whose verdict is "Warn"
  a GPU's "Fail" is read as a warning.
- JSON (`-j`): DCGM 3.x `{"DCGM GPU Diagnostic": {"test_categories": [...]}, "version": ...}`
  with results by `gpu_id` (or `gpu_ids` for the deployment tests); DCGM 4.x
  `{"DCGM Diagnostic": {"test_categories": [...]}, "metadata": {...}}` with results by
  `entity_group`/`entity_id` and a `test_summary` per test. A run that could not start
  carries `runtime_error` instead.

Statuses are DCGM's words, lowercased: pass, skip, warn, fail, and error for "Not Run" (the
test could not run). Standard library only: this runs on nodes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from bringup.node.result import ParseError

# Worst last: the verdict of a test is its worst result.
STATUSES = ("pass", "skip", "warn", "fail", "error")
_WORDS = {"pass": "pass", "skip": "skip", "warn": "warn", "fail": "fail", "not run": "error"}

# A table cell holds 45 characters of a message (DATA_INFO_TAG_LEN in dcgmi/Diag.cpp),
# printed in a field of 46 between "| " and " |".
_CHUNK = 45
_FIELD = 46


@dataclass
class DiagResult:
    """One test's verdict on one GPU.

    `gpu` None: the verdict holds for every GPU tested at once, as a deployment test or a
    DCGM 3.x "Pass - All" gives it.
    """

    gpu: int | None
    status: str  # pass | skip | warn | fail | error
    messages: list[str] = field(default_factory=list)  # the diagnostic's own words


@dataclass
class DiagTest:
    name: str  # as DCGM prints it: "Targeted Power" (3.x), "targeted_power" (4.x)
    category: str  # "Deployment", "Hardware", "Integration", "Stress"; "" when not shown
    status: str  # the verdict DCGM gives the test, else the worst of its results
    results: list[DiagResult] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)  # not tied to one GPU
    info: list[str] = field(default_factory=list)


@dataclass
class DiagReport:
    """One `dcgmi diag` run as printed."""

    format: str  # "table" or "json"
    dcgm_version: str | None = None
    driver_version: str | None = None
    device_ids: list[str] = field(default_factory=list)  # PCI device id per GPU, "2330"
    tests: list[DiagTest] = field(default_factory=list)


def worst(statuses: list[str]) -> str:
    return max(statuses, key=STATUSES.index, default="pass")


# --- detection ----------------------------------------------------------------------------

_HEADER = re.compile(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|", re.M)
# "| GPU Memory   | Pass - GPUs: 1, 2 |" or "|              | GPU0: Pass |": DCGM's own wording.
_VERDICT_ROW = re.compile(
    r"^\|[^|]*\|\s*(?:(?:Pass|Fail|Skip|Warn) - (?:All|GPUs?: [0-9, ]+)"
    r"|GPU[0-9]+: (?:Pass|Fail|Skip|Warn|Not Run))\s*(?:\||$)",
    re.M,
)


def detect(text: str) -> bool:
    """True for a `dcgmi diag` table (or an excerpt of one) or its JSON document."""
    if "test_categories" in text and re.search(r'"DCGM (?:GPU )?Diagnostic"', text):
        return True
    return bool(_HEADER.search(text) or _VERDICT_ROW.search(text))


def parse_diag(text: str) -> DiagReport:
    """A `dcgmi diag` output in any layout above; ParseError when it holds no verdict."""
    if _HEADER.search(text) or _VERDICT_ROW.search(text):
        return parse_table(text)
    return parse_json(text)


# --- tables -------------------------------------------------------------------------------

# "|-----  Deployment  --------+----...|" and "+-----  Stress  ------------+---...+"
_SECTION = re.compile(r"^[|+]-{3,}\s+(?P<name>[A-Za-z][A-Za-z ]*?)\s+-+\+")
# "Warning", "Error", "Info" (3.x) or "Warning: GPU1", "Info: GPU0" (4.x)
_LABEL = re.compile(r"^(?P<kind>Warning|Error|Info)(?::\s*(?P<group>[A-Za-z]+)(?P<id>[0-9]+))?$")
# 3.x: "Pass", "Pass - All", "Fail - GPU: 0", "Pass - GPUs: 1, 2, 3"
_V3 = re.compile(
    r"^(?P<word>Pass|Fail|Skip|Warn|Not Run)(?: - (?:(?P<all>All)|GPUs?: (?P<ids>[0-9, ]+)))?$"
)
# 4.x: "GPU0: Pass"
_V4 = re.compile(r"^(?P<group>[A-Za-z]+)(?P<id>[0-9]+): (?P<word>Pass|Fail|Skip|Warn|Not Run)$")
_METADATA = {"DCGM Version": "dcgm_version", "Driver Version Detected": "driver_version"}


@dataclass
class _Message:
    kind: str  # "warning", "error", "info"
    gpu: int | None  # 4.x names the GPU in the label
    chunks: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.chunks).strip()


def parse_table(text: str) -> DiagReport:
    """The table `dcgmi diag` prints (DCGM 2.x, 3.x or 4.x), whole or an excerpt."""
    report = DiagReport(format="table")
    category = ""
    test: DiagTest | None = None
    message: _Message | None = None
    v4_results: set[int] = set()  # id() of tests whose rows were 4.x "GPU0: Pass"
    metadata, value_text = "", ""  # the last metadata row, with its wrapped continuations

    def close_message() -> None:
        nonlocal message, test
        if message is None:
            return
        if test is None:  # an excerpt that starts at the message: the test row is cut off
            status = "fail" if message.kind == "error" else "warn"
            test = DiagTest(name=category or "(test not shown)", category=category, status=status)
            report.tests.append(test)
        _attach(test, message)
        message = None

    for line in text.splitlines():
        line = line.rstrip("\r")
        section = _SECTION.match(line)
        if section:
            close_message()
            category, test = section.group("name"), None
            continue
        if not line.startswith("|") or _HEADER.match(line):
            continue
        name, raw = _cells(line)
        value = raw.strip()
        if category == "Metadata":
            # A metadata value is not a 45-character message chunk: read the whole cell, and
            # a row without a name continues the value above it (a device-id list longer
            # than the cell wraps onto such rows).
            close_message()
            whole = _whole_cell(line)
            if name:
                metadata, value_text = name, whole
            elif metadata and whole:
                # A cut inside an id ("290" / "1, 2901") joins without a space.
                value_text += (" " if value_text.endswith(",") else "") + whole
            _metadata(report, metadata, value_text)
            continue
        if name:
            close_message()
            label = _LABEL.match(name)
            if label:
                gpu = _gpu(label.group("group"), label.group("id"))
                message = _Message(label.group("kind").lower(), gpu, [raw])
                continue
            test = DiagTest(name=name, category=category, status="pass")
            report.tests.append(test)
            _verdict(test, value, v4_results)
            continue
        # A row without a name: a verdict by GPU, or the next 45 characters of a message.
        if test is not None and (_V3.match(value) or _V4.match(value)):
            close_message()
            _verdict(test, value, v4_results)
        elif message is not None:
            message.chunks.append(raw)
    close_message()
    if not report.tests:
        raise ParseError("no test verdict found (not a `dcgmi diag` table?)")
    for each in report.tests:
        _settle(each, id(each) in v4_results)
    return report


def _cells(line: str) -> tuple[str, str]:
    """The name cell, stripped, and the text of the result cell as DCGM cut it.

    A well-formed row gives the exact 45 characters (a cut message may end or start with
    its space); a row whose padding was lost (a paste) gives the text plus a space.
    """
    parts = line.split("|")
    name = parts[1].strip() if len(parts) > 1 else ""
    cell = parts[2] if len(parts) > 2 else ""
    if len(cell) == _FIELD + 2 and cell.startswith(" "):
        return name, cell[1 : 1 + _CHUNK]
    return name, cell.strip() + " "


def _whole_cell(line: str) -> str:
    """The result cell of a row, stripped, however wide: '2901, 2901, ..., 2901'."""
    parts = line.split("|")
    return parts[2].strip() if len(parts) > 2 else ""


def _metadata(report: DiagReport, name: str, value: str) -> None:
    if name in _METADATA:
        setattr(report, _METADATA[name], value or None)
    elif _is_device_ids(name):
        report.device_ids = [v.strip() for v in value.split(",") if v.strip()]


def _is_device_ids(name: str) -> bool:
    return name.startswith("GPU") and name.endswith("Device IDs Detected")


def _gpu(group: str | None, index: str | None) -> int | None:
    return int(index) if group == "GPU" and index is not None else None


def _verdict(test: DiagTest, value: str, v4_results: set[int]) -> None:
    """Record a verdict cell: the test's own, or one or more GPUs'."""
    if match := _V4.match(value):
        gpu = _gpu(match.group("group"), match.group("id"))
        if gpu is not None:
            test.results.append(DiagResult(gpu, _WORDS[match.group("word").lower()]))
            v4_results.add(id(test))
        return
    match = _V3.match(value)
    if match is None:
        test.status = "error"
        test.messages.append(f"verdict not understood: {value!r}")
        return
    status = _WORDS[match.group("word").lower()]
    if match.group("ids"):
        for index in re.findall(r"[0-9]+", match.group("ids")):
            test.results.append(DiagResult(int(index), status))
    elif match.group("all"):
        test.results.append(DiagResult(None, status))
    else:
        test.status = status


def _attach(test: DiagTest, message: _Message) -> None:
    """A message goes to the GPU it names when that GPU did not pass, else to the test."""
    text = message.text
    if not text:
        return
    if message.kind == "info":
        test.info.append(text if message.gpu is None else f"GPU{message.gpu}: {text}")
        return
    gpu = message.gpu
    if gpu is None and (named := re.match(r"GPU ?([0-9]+)\b", text)):
        gpu = int(named.group(1))
    for result in test.results:
        if result.gpu == gpu and (message.gpu is not None or result.status != "pass"):
            result.messages.append(text)
            return
    test.messages.append(text)


def _settle(test: DiagTest, v4: bool) -> None:
    """The test's verdict once all its rows are read."""
    if v4:
        if test.status == "warn":  # a GPU row prints "Fail" for a warning (Diag.cpp)
            for result in test.results:
                if result.status == "fail":
                    result.status = "warn"
        return
    if test.results:
        test.status = worst([test.status, *(r.status for r in test.results)])


# --- JSON ---------------------------------------------------------------------------------


def _json_start(text: str) -> int | None:
    """Where the JSON document starts: dcgmi may print lines before it."""
    match = re.search(r"^\s*\{", text, re.M)
    return match.start() if match else None


def parse_json(text: str) -> DiagReport:
    """`dcgmi diag -j` of DCGM 3.x or 4.x."""
    start = _json_start(text)
    if start is None:
        raise ParseError("no JSON document found")
    try:
        doc = json.loads(text[start:])
    except ValueError as exc:
        raise ParseError(f"invalid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ParseError("the JSON document is not an object")
    root = doc.get("DCGM Diagnostic", doc.get("DCGM GPU Diagnostic"))
    if not isinstance(root, dict):
        raise ParseError('no "DCGM Diagnostic" (4.x) or "DCGM GPU Diagnostic" (3.x) object')
    if root.get("runtime_error"):
        raise ParseError(f"the diagnostic did not run: {_one_line(str(root['runtime_error']))}")
    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    report = DiagReport(
        format="json",
        dcgm_version=_str(metadata.get("version", doc.get("version", root.get("version")))),
        driver_version=_str(
            metadata.get("Driver Version Detected", doc.get("Driver Version Detected"))
        ),
        device_ids=_device_ids(doc),
    )
    for category in _list(root.get("test_categories")):
        name = _str(category.get("category")) or ""
        for entry in _list(category.get("tests")):
            report.tests.append(_json_test(entry, name))
    if not report.tests:
        raise ParseError("the JSON document holds no test")
    return report


def _json_test(entry: dict[str, Any], category: str) -> DiagTest:
    test = DiagTest(name=_str(entry.get("name")) or "(unnamed)", category=category, status="pass")
    for result in _list(entry.get("results")):
        group = result.get("entity_group", "GPU")
        if group != "GPU":
            continue  # a CPU of a Grace node: not judged here
        status = _status(result.get("status"))
        messages = _warnings(result.get("warnings"))
        test.info += [str(i) for i in _as_list(result.get("info"))]
        gpus = _json_gpus(result)
        if len(gpus) == 1:
            test.results.append(DiagResult(gpus[0], status, messages))
        else:  # a deployment test of 3.x: one verdict for every GPU listed
            test.results.append(DiagResult(None, status, messages))
    summary = entry.get("test_summary")
    if isinstance(summary, dict):
        test.status = _status(summary.get("status"))
        test.messages += [m for m in _warnings(summary.get("warnings")) if not _said(test, m)]
        if test.status == "warn":
            for result in test.results:
                if result.status == "fail":
                    result.status = "warn"
    else:
        test.status = worst([r.status for r in test.results])
    return test


def _json_gpus(result: dict[str, Any]) -> list[int]:
    if "entity_id" in result:
        return [int(result["entity_id"])]
    ids = result.get("gpu_id", result.get("gpu_ids"))
    return [int(i) for i in re.findall(r"[0-9]+", str(ids))] if ids is not None else []


def _said(test: DiagTest, message: str) -> bool:
    """True when a GPU's result already carries the message (4.x repeats it in the summary)."""
    return any(message in r.messages for r in test.results)


def _warnings(value: Any) -> list[str]:
    """Messages of a `warnings` list: objects with `warning` (3.x deployment: `warnings`)."""
    found = []
    for item in _as_list(value):
        text = item.get("warning", item.get("warnings")) if isinstance(item, dict) else item
        if text:
            found.append(" ".join(str(text).split()))
    return found


def _device_ids(doc: dict[str, Any]) -> list[str]:
    ids = doc.get("GPU Device IDs")  # 3.x
    if isinstance(ids, list):
        return [str(i) for i in ids]
    for group in _list(doc.get("entity_groups")):  # 4.x
        if group.get("entity_group") == "GPU":
            return [str(e.get("device_id", "")) for e in _list(group.get("entities"))]
    return []


def _status(value: Any) -> str:
    word = str(value or "").strip().lower()
    if word not in _WORDS:
        return "error"
    return _WORDS[word]


def _list(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]
