"""gpu.imex: the IMEX domain of an NVL72 tray (GB200/GB300).

GPU memory shared across the trays of an NVLink domain goes through NVIDIA's IMEX
service: `nvidia-imex` must run on every tray, with the same nodes_config.cfg everywhere,
and `nvidia-imex-ctl -N` must show the domain UP with every node READY and connected
(NVIDIA IMEX guide; docs/reference.md#imex). One finding says the first thing wrong, with
the evidence of the rest: one root cause (a tray whose service stopped) is one FAIL.

On a profile that requires IMEX (`nvlink.imex_required`) what cannot be read is an ERROR
naming why. A tray that is READY and connected while another tray is down WARNs: the
other tray's own gpu.imex FAILs it. Elsewhere (an HGX board, a GPU no profile fits) the
check says nothing unless the node or the output shows an IMEX domain, which is then
judged by what it reports.
"""

from __future__ import annotations

from bringup.checks import finding, has_profile
from bringup.findings import Finding, Status
from bringup.node.gpu_facts import GpuFacts
from bringup.node.imex_facts import ImexDomain, ImexFacts, ImexNode
from bringup.profile import Profile

CHECK = "gpu.imex"
CONNECTED = "C"

# Actions, in the IMEX guide's words and commands (docs/reference.md#imex).
START = (
    "start the IMEX service on this node: `sudo systemctl enable --now nvidia-imex`; "
    "why it stopped: `journalctl -u nvidia-imex` and /var/log/nvidia-imex.log"
)
DOMAIN = (
    "on each node not READY or not connected: `systemctl status nvidia-imex` and "
    "/var/log/nvidia-imex.log; every node of the domain needs the same "
    "/etc/nvidia-imex/nodes_config.cfg (a different node map disables communication, `!M!`), "
    "then `sudo systemctl restart nvidia-imex` on them; `nvidia-imex-ctl -N` must show "
    "every node READY, C in every cell and `Domain State: UP`"
)
CONFIG = (
    "list this node's IP address in /etc/nvidia-imex/nodes_config.cfg, the same file on "
    "every node of the NVLink domain, then `sudo systemctl restart nvidia-imex` on all of them"
)
REPORT = "run `nvidia-imex-ctl -N` on the tray and keep its whole output"
INSTALL = (
    "install the nvidia-imex package of the driver's branch (`nvidia-imex` from 580, "
    "`nvidia-imex-<branch>` before it) and `sudo systemctl enable --now nvidia-imex`"
)


def required(profile: Profile) -> bool:
    """The profile's trays need IMEX (Check.applies: an unmeasured gpu probe leaves gpu.imex
    unjudged only where it does)."""
    return has_profile(profile) and profile.nvlink is not None and profile.nvlink.imex_required


def judge_imex(facts: GpuFacts, profile: Profile) -> list[Finding]:
    needed = required(profile)
    imex = facts.imex
    if imex is None:
        if not needed:
            return []
        return [
            finding(
                CHECK,
                Status.SKIP,
                f"IMEX was not read from this source ({facts.source}): it is judged on the node "
                "(`bringup check`) or from a pasted `nvidia-imex-ctl -N`",
            )
        ]
    if imex.domain is None:
        return [_unread(imex)] if needed else []
    if not needed:
        # No profile asks for IMEX here, but a domain is running: judge what it reports.
        me = _this_node(imex)
        found = _judge_domain(imex.domain, me, imex, member=False)
        return [found or _passed(imex.domain, me, imex)]
    me = _this_node(imex)
    problem = _judge_domain(imex.domain, me, imex)
    if problem is None or problem.status is Status.WARN:
        problem = _judge_config(imex, me) or problem
    return [problem or _passed(imex.domain, me, imex)]


def _unread(imex: ImexFacts) -> Finding:
    """No domain report: the service is down (FAIL) or nothing could say (ERROR)."""
    reason = imex.domain_error or "no `nvidia-imex-ctl -N` report"
    state = imex.service_state
    if state is not None and state != "active":
        return finding(
            CHECK,
            Status.FAIL,
            f"nvidia-imex service {state} (`systemctl is-active nvidia-imex`); {reason}",
            value=state,
            expected="active",
            action=START,
        )
    if "not installed" in reason:
        return finding(CHECK, Status.ERROR, f"IMEX not read: {reason}", action=INSTALL)
    said = f"; service {state}" if state else ""
    return finding(CHECK, Status.ERROR, f"IMEX domain not read: {reason}{said}", action=START)


def _this_node(imex: ImexFacts) -> ImexNode | None:
    """The domain's line of this node: marked by IMEX (580), else by one of its addresses."""
    domain = imex.domain
    if domain is None:
        return None
    marked = [node for node in domain.nodes if node.local]
    if marked:
        return marked[0]
    names = set(imex.local_addresses)
    return next((n for n in domain.nodes if n.address in names or n.hostname in names), None)


def _name(node: ImexNode) -> str:
    host = f" {node.hostname}" if node.hostname else ""
    return f"node #{node.index} ({node.address}{host})"


def _judge_domain(
    domain: ImexDomain, me: ImexNode | None, imex: ImexFacts, member: bool = True
) -> Finding | None:
    """The domain's state, its nodes and this node's connections; None when all is well.
    `member`: this node must be in the domain (a tray whose profile requires IMEX)."""
    if member and imex.source == "node" and me is None:
        addresses = ", ".join(imex.local_addresses) or "none read"
        return finding(
            CHECK,
            Status.FAIL,
            f"this node ({addresses}) is not in the IMEX domain's {len(domain.nodes)} nodes",
            value="absent",
            expected="listed and READY",
            action=CONFIG,
        )
    if not domain.nodes:
        return finding(
            CHECK,
            Status.ERROR,
            f"the IMEX report lists no node (Domain State {domain.state}): a trimmed output",
            action=REPORT,
        )
    down = [node for node in domain.nodes if node.status != "READY"]
    not_ready = {node.index for node in down}
    # A link to a node that is itself down is that node's fault, not this one's.
    cut = [
        c
        for c in domain.connections
        if c.state != CONNECTED
        and (me is None or me.index in (c.source, c.target))
        and not ({c.source, c.target} - ({me.index} if me else set())) & not_ready
    ]
    state = domain.state or "not printed"
    if state == "UP" and not down and not cut:
        return None
    if domain.state is None and not down and not cut:
        return finding(
            CHECK,
            Status.ERROR,
            f"the IMEX report has no `Domain State:` line ({len(domain.nodes)} nodes READY): "
            "a trimmed output",
            action=REPORT,
        )
    parts = []
    mine = me is not None and (me.status != "READY" or bool(cut))
    if me is not None and me.status != "READY":
        parts.append(f"this {_name(me)} {me.status}")
    others = [node for node in down if node is not me]
    if others:
        shown = ", ".join(f"{_name(n)} {n.status}" for n in others[:4])
        more = f" and {len(others) - 4} more" if len(others) > 4 else ""
        parts.append(f"{shown}{more}")
    if cut:
        shown = ", ".join(f"#{c.source}->#{c.target} {c.state}" for c in cut[:4])
        more = f" and {len(cut) - 4} more" if len(cut) > 4 else ""
        parts.append(f"not connected: {shown}{more}")
    ready = len(domain.nodes) - len(down)
    detail = "; ".join(parts) or "every node READY"
    summary = f"IMEX domain {state}, {ready}/{len(domain.nodes)} nodes READY: {detail}"
    if me is not None and not mine:
        # This node is READY and reaches every READY peer: the fault is the other nodes'
        # (their own gpu.imex FAILs them). Said here, not failed twice, and a healthy tray
        # is not drained for its neighbour (`slurm healthcheck`).
        return finding(
            CHECK,
            Status.WARN,
            f"{summary} (this {_name(me)} READY and connected)",
            value=state,
            expected="UP, every node READY and connected",
            action=DOMAIN,
        )
    return finding(
        CHECK,
        Status.FAIL,
        summary,
        value=state if state != "UP" else (me.status if me is not None else "UP"),
        expected="UP, every node READY and connected",
        action=DOMAIN,
    )


def _judge_config(imex: ImexFacts, me: ImexNode | None) -> Finding | None:
    """nodes_config.cfg lists this node (a live node only: a pasted report has no file)."""
    if imex.source != "node":
        return None
    if imex.config_nodes is None:
        reason = imex.config_error or "not read"
        return finding(CHECK, Status.ERROR, f"IMEX node list not read: {reason}", action=CONFIG)
    names = set(imex.local_addresses) | ({me.address} if me is not None else set())
    if not names & set(imex.config_nodes):
        path = imex.config_path or "nodes_config.cfg"
        return finding(
            CHECK,
            Status.FAIL,
            f"{path} ({len(imex.config_nodes)} entries) does not list this node "
            f"({', '.join(sorted(names)) or 'no address read'})",
            value="absent",
            expected="listed",
            action=CONFIG,
        )
    return None


def _passed(domain: ImexDomain, me: ImexNode | None, imex: ImexFacts) -> Finding:
    total = len(domain.nodes)
    where = f", this {_name(me)} connected to all" if me is not None else ""
    listed = "; nodes_config.cfg lists it" if imex.config_nodes is not None and me else ""
    return finding(
        CHECK,
        Status.PASS,
        f"IMEX domain UP, {total}/{total} nodes READY{where}{listed}",
        value="UP",
    )
