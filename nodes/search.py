"""The search strategy: AdaExplore's diversity-preserving tree search over candidate kernels.

This module knows nothing of LangGraph, models or hardware. It holds a tree of kernels and answers
four questions: which node to expand next and how (`select`), what the new child looks like
(`expand`), how a finished evaluation changes the tree (`update`), which kernel is best (`best`) and
whether to stop (`should_stop`).

The tree
--------
The root is the reference program (speedup 1 by definition, reward 1.0). Every other node is one
candidate kernel, created by one action on its parent:

- large step: a new design, written with a pool of representative kernels in view;
- small step: a targeted change to the parent;
- repair: a fix of the parent's error.

Nodes are grouped into *segments*: a large step starts a new segment, small steps and repairs stay in
their parent's segment, so a segment is one run of consecutive small steps on one design. The
representative pool for a large step is the best correct node of each segment, at most `pool_size`
of them sampled (seeded).

Choosing the next expansion
---------------------------
1. Repairs come first: a failed or wrong node that has no child yet and sits at the end of fewer
   than `max_repairs` consecutive repairs is repaired (oldest first). A failure is fixed while its
   context is fresh; the bound keeps one broken design from eating the budget. A failed node whose
   repairs are used up is closed.
2. Otherwise UCT descends from the root. At a node v the options are each child c that still has an
   expandable node in its subtree, scored
       Q(c) + c_explore * sqrt(ln(N(v) + 1) / N(c)),
   and, when v itself may be expanded, a virtual "expand v" option scored
       r(v) + c_expand * sqrt(ln(N(v) + 1) / (children(v) + 1)).
   N counts the nodes of a subtree (v included, pending nodes included), Q = W / N where W sums the
   rewards of the finished nodes of the subtree; a pending node therefore counts as a visit with
   reward 0 (virtual loss), which spreads k simultaneous expansions over the tree. r(v) is v's own
   reward (1.0 for the root). Ties go to the expand option, then to the older child.
   A repair stands in for the failure it fixed: when a repair scores better than the failed node it
   repairs, that node (and the failed nodes before it on the same repair chain) is credited with the
   repair's reward in W, so a design that needed a fix is valued as the kernel it became, not as a
   failure. Its own status and reward stay as evaluated; only W (the value UCT sees) changes.
   A closed node (`close`: a program that only repeated an earlier failure and was not judged,
   nodes/repeats.py) is never repaired: its failure is the earlier node's, whose repairs stand for it.
3. The action at the chosen node: the root takes a large step; a node with `max_small_children`
   (default 2) small-step children is forced to take a large step; otherwise a large step with
   probability `p_large` (default 0.2), else a small step. Only correct nodes are expanded this way.

Reward
------
0 for a kernel that fails to parse, compile or run; 0.05 for one that runs but computes wrong output;
for a correct kernel, its speedup s clipped to [0.1, 10] and mapped log-linearly onto [0.4, 1.6]:
    reward = 1.0 + 0.6 * log10(s)      (s = 0.1 -> 0.4, s = 1 -> 1.0, s = 10 -> 1.6)
so equal speed ratios count equally and "as fast as the reference" sits in the middle. When timing is
not meaningful (a CPU run), a correct kernel has no speedup; it scores as s = 1 (reward 1.0) and the
search runs on correctness alone.

Determinism: every random draw uses a generator seeded with (seed, sequence number of the decision),
so a tree rebuilt from its history makes the same choices, whatever order results arrived in.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

Action = Literal["large_step", "small_step", "repair"]
NodeStatus = Literal["root", "pending", "correct", "wrong", "failed"]
"""`failed`: did not parse, compile or run; `wrong`: ran but computed wrong output (or wrong shape)."""

ROOT_ID = "n0"
SPEEDUP_CLIP = (0.1, 10.0)
REWARD_FAILED = 0.0
REWARD_WRONG = 0.05


def reward_for(status: NodeStatus, speedup: float | None) -> float:
    """The reward of a finished node (see the module docstring)."""
    if status == "failed":
        return REWARD_FAILED
    if status == "wrong":
        return REWARD_WRONG
    if status != "correct":
        raise ValueError(f"no reward for a {status} node")
    s = 1.0 if speedup is None else min(max(speedup, SPEEDUP_CLIP[0]), SPEEDUP_CLIP[1])
    return 1.0 + 0.6 * math.log10(s)


class SearchConfig(BaseModel):
    """Knobs of the search; defaults follow AdaExplore."""

    c_explore: float = 0.3
    """Exploration weight for descending into an existing child."""
    c_expand: float = 0.3
    """Exploration weight for the virtual "expand this node" option."""
    p_large: float = 0.2
    """Probability of a large step at a correct non-root node."""
    max_small_children: int = 2
    """A node with this many small-step children must take a large step."""
    max_repairs: int = 2
    """At most this many consecutive repairs on one failing line."""
    pool_size: int = 5
    """At most this many representative kernels shown to a large step."""
    seed: int = 0


class Outcome(BaseModel):
    """What an evaluation said about a node, in the terms the search needs."""

    status: Literal["correct", "wrong", "failed"]
    speedup: float | None = None
    """Measured speedup vs eager; None when timing is not meaningful."""
    fraction_of_floor: float | None = None
    """Roofline floor time / kernel time (1.0 = at the floor); None when unknown."""
    speedup_vs_compile: float | None = None
    """Measured speedup vs torch.compile; None when not measured."""


class TreeNode(BaseModel):
    """One node of the tree; the root stands for the reference program."""

    id: str
    index: int
    parent: str | None = None
    action: Action | None = None
    depth: int = 0
    status: NodeStatus = "pending"
    speedup: float | None = None
    fraction_of_floor: float | None = None
    speedup_vs_compile: float | None = None
    reward: float | None = None
    children: list[str] = Field(default_factory=list)
    small_children: int = 0
    repair_depth: int = 0
    """Number of consecutive repairs that led to this node (0 unless it was made by a repair)."""
    segment: str = ROOT_ID
    """Id of the node that started this node's run of small steps (a large-step node)."""
    visits: int = 1
    """Nodes in this subtree, this one and pending ones included."""
    value_sum: float = 0.0
    """Sum of the credits of the finished nodes in this subtree."""
    credit: float = 0.0
    """What this node adds to W: its reward, raised to a later repair's reward when one fixed it."""

    @property
    def q(self) -> float:
        return self.value_sum / self.visits if self.visits else 0.0


class Decision(BaseModel):
    """One planned expansion: which node, which action, and the pool a large step sees."""

    seq: int
    """Index the new child will get (its id is f"n{seq}")."""
    parent: str
    action: Action
    pool: list[str] = Field(default_factory=list)
    """Representative node ids for a large step, best first."""
    reason: str = ""

    @property
    def child_id(self) -> str:
        return f"n{self.seq}"


class Budget(BaseModel):
    """Limits of one run; 0 or None means no limit on that axis (candidates must be > 0)."""

    candidates: int = 8
    llm_calls: int | None = None
    wall_s: float | None = None
    roofline_fraction: float | None = 0.9
    """Stop once the best kernel reaches this fraction of the roofline floor (floor / time)."""


class Spent(BaseModel):
    """What a run has used so far."""

    candidates: int = 0
    """Expansions issued (pending ones included)."""
    llm_calls: int = 0
    wall_s: float = 0.0


class SearchTree:
    """The tree plus the strategy; rebuildable from its decisions and outcomes."""

    def __init__(self, config: SearchConfig | None = None) -> None:
        self.config = config or SearchConfig()
        root = TreeNode(id=ROOT_ID, index=0, status="root", reward=1.0, speedup=1.0, segment=ROOT_ID)
        root.visits = 1
        root.value_sum = 0.0
        self.nodes: dict[str, TreeNode] = {ROOT_ID: root}
        self.closed: set[str] = set()
        """Failed nodes that are not repaired (see `close`)."""

    # -- construction ---------------------------------------------------------------------------------
    @classmethod
    def replay(
        cls,
        decisions: list[Decision],
        outcomes: dict[str, Outcome],
        config: SearchConfig | None = None,
    ) -> SearchTree:
        """Rebuild a tree from its history: decisions in the order made, outcomes by child id."""
        tree = cls(config)
        for d in sorted(decisions, key=lambda d: d.seq):
            tree.expand(d)
        for d in sorted(decisions, key=lambda d: d.seq):
            if d.child_id in outcomes:
                tree.update(d.child_id, outcomes[d.child_id])
        return tree

    @property
    def root(self) -> TreeNode:
        return self.nodes[ROOT_ID]

    def _rng(self, seq: int) -> random.Random:
        return random.Random(f"{self.config.seed}:{seq}")

    def _ancestors(self, node: TreeNode) -> list[TreeNode]:
        out = []
        cur = node
        while cur.parent is not None:
            cur = self.nodes[cur.parent]
            out.append(cur)
        return out

    # -- strategy -------------------------------------------------------------------------------------
    def pending(self) -> list[TreeNode]:
        return [n for n in self.nodes.values() if n.status == "pending"]

    def close(self, node_ids: Iterable[str]) -> None:
        """Never repair these failed nodes (programs that only repeated an earlier failure)."""
        self.closed.update(n for n in node_ids if n in self.nodes and n != ROOT_ID)

    def _needs_repair(self, node: TreeNode) -> bool:
        return (
            node.status in ("failed", "wrong")
            and not node.children
            and node.repair_depth < self.config.max_repairs
            and node.id not in self.closed
        )

    def _expandable(self, node: TreeNode) -> bool:
        return node.status in ("root", "correct")

    def _alive(self) -> set[str]:
        """Ids of nodes whose subtree holds a node UCT may expand."""
        alive: set[str] = set()
        for node in sorted(self.nodes.values(), key=lambda n: -n.depth):
            if self._expandable(node) or any(c in alive for c in node.children):
                alive.add(node.id)
        return alive

    def _uct_node(self) -> TreeNode | None:
        alive = self._alive()
        if ROOT_ID not in alive:
            return None
        v = self.root
        c = self.config
        while True:
            log_n = math.log(v.visits + 1)
            best_key: tuple[float, int, int] | None = None
            best_node: TreeNode | None = None
            if self._expandable(v):
                own = v.reward if v.reward is not None else 0.0
                score = own + c.c_expand * math.sqrt(log_n / (len(v.children) + 1))
                best_key, best_node = (score, 1, 0), v
            for cid in v.children:
                if cid not in alive:
                    continue
                child = self.nodes[cid]
                score = child.q + c.c_explore * math.sqrt(log_n / child.visits)
                key = (score, 0, -child.index)
                if best_key is None or key > best_key:
                    best_key, best_node = key, child
            if best_node is None:
                return None
            if best_node is v:
                return v
            v = best_node

    def representatives(self, rng: random.Random | None = None, *, exclude: str | None = None) -> list[str]:
        """The best correct node of each segment, at most pool_size sampled, best first."""
        best_of: dict[str, TreeNode] = {}
        for node in self.nodes.values():
            if node.status != "correct" or node.id == exclude:
                continue
            cur = best_of.get(node.segment)
            if cur is None or (node.reward or 0.0, -node.index) > (cur.reward or 0.0, -cur.index):
                best_of[node.segment] = node
        reps = sorted(best_of.values(), key=lambda n: n.index)
        if len(reps) > self.config.pool_size:
            reps = (rng or random.Random(self.config.seed)).sample(reps, self.config.pool_size)
        reps.sort(key=lambda n: (-(n.reward or 0.0), n.index))
        return [n.id for n in reps]

    def select(self) -> Decision | None:
        """The next expansion, or None when no node can be expanded (never while the root can)."""
        seq = len(self.nodes)
        for failed in sorted(self.nodes.values(), key=lambda n: n.index):
            if self._needs_repair(failed):
                return Decision(
                    seq=seq,
                    parent=failed.id,
                    action="repair",
                    reason=f"repair {failed.repair_depth + 1}/{self.config.max_repairs} of {failed.status} {failed.id}",
                )
        node = self._uct_node()
        if node is None:
            return None
        rng = self._rng(seq)
        if node.id == ROOT_ID:
            action: Action = "large_step"
            reason = "the root takes a large step"
        elif node.small_children >= self.config.max_small_children:
            action = "large_step"
            reason = f"forced: {node.id} has {node.small_children} small-step children"
        else:
            draw = rng.random()
            action = "large_step" if draw < self.config.p_large else "small_step"
            cmp = "<" if action == "large_step" else ">="
            reason = f"draw {draw:.3f} {cmp} p_large {self.config.p_large}"
        pool = self.representatives(rng) if action == "large_step" else []
        return Decision(seq=seq, parent=node.id, action=action, pool=pool, reason=reason)

    def expand(self, decision: Decision) -> TreeNode:
        """Add the pending child a decision creates."""
        if decision.child_id in self.nodes:
            raise ValueError(f"node {decision.child_id} already exists")
        if decision.seq != len(self.nodes):
            raise ValueError(f"decision seq {decision.seq} out of order (tree has {len(self.nodes)} nodes)")
        parent = self.nodes[decision.parent]
        child = TreeNode(
            id=decision.child_id,
            index=decision.seq,
            parent=parent.id,
            action=decision.action,
            depth=parent.depth + 1,
            status="pending",
            repair_depth=parent.repair_depth + 1 if decision.action == "repair" else 0,
            segment=decision.child_id if decision.action == "large_step" else parent.segment,
        )
        if decision.action == "repair" and parent.id == ROOT_ID:
            raise ValueError("the root cannot be repaired")
        self.nodes[child.id] = child
        parent.children.append(child.id)
        if decision.action == "small_step":
            parent.small_children += 1
        for anc in self._ancestors(child):
            anc.visits += 1
        return child

    def plan(self, k: int) -> list[Decision]:
        """Select and expand up to k decisions (pending nodes act as virtual losses in between)."""
        out = []
        for _ in range(max(0, k)):
            d = self.select()
            if d is None:
                break
            self.expand(d)
            out.append(d)
        return out

    def update(self, node_id: str, outcome: Outcome) -> float:
        """Record a finished evaluation; returns the node's reward."""
        node = self.nodes[node_id]
        if node.status != "pending":
            raise ValueError(f"node {node_id} already has a result ({node.status})")
        r = reward_for(outcome.status, outcome.speedup)
        node.status = outcome.status
        node.speedup = outcome.speedup if outcome.status == "correct" else None
        node.fraction_of_floor = outcome.fraction_of_floor if outcome.status == "correct" else None
        node.speedup_vs_compile = outcome.speedup_vs_compile if outcome.status == "correct" else None
        node.reward = r
        self._credit(node, r)
        # a repair that did better stands in for the failures it fixed, up its repair chain
        cur = node
        while cur.action == "repair" and cur.parent is not None:
            failed = self.nodes[cur.parent]
            if r <= failed.credit:
                break
            self._credit(failed, r - failed.credit)
            cur = failed
        return r

    def _credit(self, node: TreeNode, delta: float) -> None:
        node.credit += delta
        node.value_sum += delta
        for anc in self._ancestors(node):
            anc.value_sum += delta

    def best(self) -> TreeNode | None:
        """The fastest correct node; with no timing, the earliest correct one; None if none is correct."""
        correct = [n for n in self.nodes.values() if n.status == "correct"]
        if not correct:
            return None
        timed = [n for n in correct if n.speedup is not None]
        if timed:
            return max(timed, key=lambda n: (n.speedup or 0.0, -n.index))
        return min(correct, key=lambda n: n.index)

    def should_stop(self, budget: Budget, spent: Spent) -> str | None:
        """Why no new expansion should be issued, or None to go on."""
        if spent.candidates >= budget.candidates:
            return f"candidate budget spent ({spent.candidates}/{budget.candidates})"
        if budget.llm_calls and spent.llm_calls >= budget.llm_calls:
            return f"LLM call budget spent ({spent.llm_calls}/{budget.llm_calls})"
        if budget.wall_s and spent.wall_s >= budget.wall_s:
            return f"wall-time budget spent ({spent.wall_s:.0f}/{budget.wall_s:.0f} s)"
        best = self.best()
        if (
            budget.roofline_fraction
            and best is not None
            and best.fraction_of_floor is not None
            and best.fraction_of_floor >= budget.roofline_fraction
            # torch.compile faster still shows room the floor does not (its bandwidth is a measured copy's):
            # on an H200, level1/18 and 26 stopped at 0.98x torch.compile where 16 candidates found 1.04-1.05x
            and (best.speedup_vs_compile is None or best.speedup_vs_compile >= 1.0)
        ):
            return (
                f"{best.id} reached {best.fraction_of_floor:.0%} of the roofline floor "
                f"(stop at {budget.roofline_fraction:.0%})"
            )
        if self._uct_node() is None and not any(self._needs_repair(n) for n in self.nodes.values()):
            return "no node left to expand"
        return None

    def summary(self) -> dict[str, object]:
        """Counts and the best node, for result.json."""
        finished = [n for n in self.nodes.values() if n.status not in ("root", "pending")]
        best = self.best()
        by_action: dict[str, int] = {}
        for n in self.nodes.values():
            if n.action:
                by_action[n.action] = by_action.get(n.action, 0) + 1
        return {
            "nodes": len(self.nodes) - 1,
            "finished": len(finished),
            "correct": sum(n.status == "correct" for n in finished),
            "wrong": sum(n.status == "wrong" for n in finished),
            "failed": sum(n.status == "failed" for n in finished),
            "by_action": by_action,
            "max_depth": max(n.depth for n in self.nodes.values()),
            "segments": len({n.segment for n in self.nodes.values() if n.id != ROOT_ID}),
            "best": best.id if best else None,
        }
