"""``manage.py uid_fields move-shards``: the copy, ``--switch``, ``--cleanup``,
``--abort`` (and ``--copy-back``) of a shard move, by the portable mover or by logical
replication, each step's report and the next step to run. A mixin of the command
(``commands/uid_fields.py``), which owns the arguments and the output rules."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from ...ops.move_recovery import early_deploy
from ...ops.replication import ReplicationError
from ..ops.moves import shard_move
from ..ops.replication import logical_refusal_of, logical_shard_move

__all__ = ["MoveShardsCommands"]


class MoveShardsCommands(BaseCommand):
    """The ``move-shards`` subcommand of ``manage.py uid_fields``."""

    verbosity: int = 1  # set by the command's handle() from ``-v``

    def do_move_shards(
        self,
        map: str,
        source: str,
        target: str,
        span: str | None,
        logical_shards: int | None,
        batch_size: int,
        state: str | None,
        cleanup: bool,
        dry_run: bool = False,
        switch: bool = False,
        unfence: bool = False,
        abort: bool = False,
        method: str = "auto",
        copy_back: bool = False,
        **options: Any,
    ) -> None:
        if dry_run and not cleanup:
            raise CommandError("--dry-run goes with --cleanup: a copy deletes nothing")
        if copy_back and not abort:
            raise CommandError("--copy-back goes with --abort")
        low = high = None
        if span is not None:
            try:
                low, high = (int(part) for part in span.split(":"))
            except ValueError:
                raise CommandError(f"--range must be start:stop, got {span!r}") from None
        given = state
        state = state or f".uid_fields-move-{map}-{source}-{target}-{span or 'all'}.json".replace(
            ":", "-"
        )
        if self._by_replication(map, source, target, low, high, logical_shards, method):
            self._logical(
                map,
                source,
                target,
                low,
                high,
                logical_shards,
                given or state.replace(".json", "-logical.json"),
                switch=switch,
                cleanup=cleanup,
                abort=abort,
                unfence=unfence,
                dry_run=dry_run,
                batch_size=batch_size,
                copy_back=copy_back,
            )
            return
        try:
            move = shard_move(
                map,
                source=source,
                target=target,
                low=low,
                high=high,
                space=logical_shards,
                batch=batch_size,
                state=state,
                on_progress=self._progress_line,
            )
        except (ValueError, TypeError, LookupError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{move}: {', '.join(t.store.label for t in move.tables)}")
        if unfence:
            try:
                move.unfence()
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"fence removed: {source} takes writes of the range again")
            return
        if abort:
            try:
                deleted = move.abort(copy_back=copy_back)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            counts = ", ".join(f"{label} {n}" for label, n in deleted.items())
            self.stdout.write(
                f"aborted: the target's copies ({counts}) and the fence are removed; "
                f"{source} keeps the range"
            )
            return
        if switch:
            self._switch(move)
            return
        if cleanup:
            self._cleanup(move, dry_run)
            return
        try:
            copies = move.copy()
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        for copied in copies:
            self.stdout.write(str(copied))
        checked = move.verify()
        for check in checked:
            self.stdout.write(str(check))
        early = early_deploy(move, switched=move.state.switched, forward=False)
        if not all(c.ok for c in checked):
            if move.after_switch:
                missing = sum(c.missing for c in checked)
                raise CommandError(
                    f"{missing} rows of {source} are not on {target}, and nothing tells "
                    "whether they were never copied or deleted there since (the source "
                    "changed after the switch, or there was no --switch): nothing was "
                    "copied; --cleanup keeps them on the source and names some"
                    + (f". Note: {early}" if early and move.state.started_ms else "")
                )
            self.stdout.write(
                "the copy still differs where writes went on meanwhile; --switch closes "
                "the range for writes and makes it exact"
            )
        if early and move.state.started_ms is not None:
            step = early  # this move copied, and the map came before its switch
        elif move.deployed:
            step = f"deployed: run move-shards --cleanup to delete the copies left on {source}"
        elif move.state.switched:
            step = (
                f"switched: give these logical shards to {target} in the map and deploy, "
                "then run move-shards --cleanup"
            )
        else:
            step = (
                "next: run move-shards --switch (closes the range for writes on "
                f"{source}, catches up and verifies), give these logical shards to "
                f"{target} in the map and deploy, then run move-shards --cleanup"
            )
        self.stdout.write(step)

    def _by_replication(
        self,
        map: str,
        source: str,
        target: str,
        low: int | None,
        high: int | None,
        space: int | None,
        method: str,
    ) -> bool:
        """Whether this move goes by logical replication: ``--method logical``, or
        ``auto`` when both databases are PostgreSQL and every table's route selects
        logical shards in SQL (snowflakes' mixed modulo, locality UUIDs and uniqids
        cannot be filtered by a publication)."""
        if method == "portable":
            return False
        try:
            move = shard_move(map, source=source, target=target, low=low, high=high, space=space)
            reason = logical_refusal_of(move)
        except (ValueError, TypeError, LookupError) as exc:
            raise CommandError(str(exc)) from None
        if reason and method == "logical":
            raise CommandError(reason)
        if reason and self.verbosity >= 2:
            self.stdout.write(f"portable move: {reason}")
        return reason is None

    def _logical(
        self,
        map: str,
        source: str,
        target: str,
        low: int | None,
        high: int | None,
        space: int | None,
        state: str,
        *,
        switch: bool,
        cleanup: bool,
        abort: bool,
        unfence: bool,
        dry_run: bool,
        batch_size: int,
        copy_back: bool = False,
    ) -> None:
        """The move by logical replication. A plain run starts (or resumes) the
        publication, slot and subscription and waits until the target has copied the
        range and caught up; replication goes on after it. ``--switch`` fences the
        range on the source, waits for the target to confirm the last write, compares
        every logical shard and drops the replication; then the new map is deployed and
        ``--cleanup`` deletes the source's range and removes the fence."""
        try:
            move = shard_move(map, source=source, target=target, low=low, high=high, space=space)
            logical = logical_shard_move(
                move, map_name=map, state=state, on_progress=self._progress_line
            )
        except (ValueError, TypeError, LookupError) as exc:
            raise CommandError(str(exc)) from None
        with logical:
            self.stdout.write(f"{logical}: {', '.join(t.label for t in logical.tables)}")
            try:
                if abort:
                    logical.abort(copy_back=copy_back)
                    self.stdout.write(
                        "aborted: subscription, slot, publication, the target's copies and "
                        "the fence are removed"
                    )
                elif unfence:
                    logical.unfence()
                    self.stdout.write(
                        f"fence removed: {source} takes writes of the range again; {target}'s "
                        "copies are left (the next move of the range deletes them first)"
                    )
                elif cleanup:
                    cleaned = logical.cleanup(batch=batch_size, dry_run=dry_run)
                    for report in cleaned:
                        self.stdout.write(str(report))
                    kept = sum(r.kept for r in cleaned)
                    if kept:
                        raise CommandError(
                            f"{kept} rows were kept on {source} (listed above): they are "
                            f"not on {target}"
                        )
                elif not switch and early_deploy(move, switched=logical.switched):
                    logical.run(switch=False)  # streaming goes on: the source still writes
                    self.stdout.write(
                        f"copied and caught up: {target} follows {source} by logical "
                        f"replication. But {early_deploy(move, switched=logical.switched)}"
                    )
                elif logical.switched:
                    self.stdout.write(
                        f"switched already: give these logical shards to {target} in the map "
                        "and deploy, then run move-shards --cleanup"
                    )
                else:
                    logical.run(switch=switch)
                    self.stdout.write(
                        f"switched: writes of the range are closed on {source} (they fail "
                        "with ShardMoveFencedError, retryable); the subscription, slot and "
                        f"publication are dropped. Next: give these logical shards to {target} "
                        "in the map and deploy, then run move-shards --cleanup"
                        if switch
                        else f"copied and caught up: {target} follows {source} by logical "
                        "replication. Next: move-shards --switch, then deploy the new map, "
                        "then move-shards --cleanup (or --abort to call it off)"
                    )
            except (ValueError, ReplicationError) as exc:  # ReplicationUnavailable too
                raise CommandError(str(exc)) from None

    def _cleanup(self, move: Any, dry_run: bool) -> None:
        """``--cleanup``: reports, never a traceback; rows kept are named."""
        try:
            cleaned = move.cleanup(dry_run=dry_run)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        except DatabaseError as exc:
            raise CommandError(
                f"the cleanup stopped on a database error ({exc}): what it deleted was on "
                f"{move.target}; run move-shards --cleanup again"
            ) from None
        for report in cleaned:
            self.stdout.write(str(report))
        kept = sum(r.kept for r in cleaned)
        if kept:
            were = "would be" if dry_run else "were"
            changed = sum(r.changed for r in cleaned)
            other = f" ({changed} of them are there in another version)" if changed else ""
            raise CommandError(
                f"{kept} rows {were} kept on {move.source} (listed above): they are not on "
                f"{move.target}{other}; the fence stays until a cleanup keeps nothing"
            )
        if not dry_run:
            self.stdout.write(
                f"done: the fence is removed, {move.source} keeps nothing of the range"
            )

    def _switch(self, move: Any) -> None:
        """``--switch``: the fence, then a last catch-up and an exact verify behind it."""
        try:
            copied, checked = move.switch()
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        for report in [*copied, *checked]:
            self.stdout.write(str(report))
        if not all(c.ok for c in checked):
            raise CommandError(
                f"the copy on {move.target} still differs behind the fence: run --switch "
                f"again (or --unfence to call the switch off)"
            )
        self.stdout.write(
            f"switched: writes of the range are closed on {move.source} (they fail with "
            f"ShardMoveFencedError, retryable). Next: give these logical shards to "
            f"{move.target} in the map and deploy, then run move-shards --cleanup"
        )

    def _progress_line(self, progress: object) -> None:
        """A long pass's progress, at ``-v 1`` and above."""
        if self.verbosity >= 1:
            self.stdout.write(str(progress))
