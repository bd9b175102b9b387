"""Proposing edits: evidence packets, proposers, merge, and patch ops."""

from __future__ import annotations

from skilltune.proposal import Edit, EvidencePacket, Proposal, ProposerCall, RejectedEdit, Trajectory
from skilltune.propose.base import PROPOSERS, Proposer, ProposerOptions, SlowUpdate, make_proposer
from skilltune.propose.edit import PatchError, apply_edit, apply_patch
from skilltune.propose.merge import EditBudget, MergeResult, merge_edits

__all__ = [
    "PROPOSERS",
    "Edit",
    "EditBudget",
    "EvidencePacket",
    "MergeResult",
    "PatchError",
    "Proposal",
    "Proposer",
    "ProposerCall",
    "ProposerOptions",
    "RejectedEdit",
    "SlowUpdate",
    "Trajectory",
    "apply_edit",
    "apply_patch",
    "make_proposer",
    "merge_edits",
]
