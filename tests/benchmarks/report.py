"""The benchmark report: targets with their status, tables as text and Markdown, a chart."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .harness import Section

__all__ = ["chart", "markdown", "targets", "text_table"]

GEN = "uid_fields snowflake (twitter)"
LIMIT = 4096 * 1000

# Why a target can miss, written next to it in the report when it does.
CAUSES = {
    "django_insert": (
        "bulk_create with a Snowflake key inserts one more column per row than "
        "BigAutoField (the id): Django's insert compiler does per-field, per-row Python "
        "work for it (pre_save, get_db_prep_save) and the driver sends one more array, "
        "while BigAutoField's ids are made by the server. The SQL alone sets a floor: the "
        "same UNNEST insert sent with psycopg, 10,000 rows, took 49.8 ms with the ids as "
        "a text array (how Django binds) against 44.7 ms for identity with RETURNING "
        "(1.11x), and 43.3 ms with the ids as a binary array; Django's "
        "server_side_binding did not change the ratio (1.21x vs 1.18x). See Gaps below."
    ),
    "sqla_insert": (
        "the Snowflake rows carry one more bound parameter per row (the id) than the "
        "identity rows, whose ids the server makes; on loopback that is the difference. "
        "See Gaps below."
    ),
    "fan_out": (
        "on loopback a shard's query is mostly Python (the ORM's compiler, the driver, "
        "building rows) under one GIL on 2 cores, so eight at once take about as much CPU "
        "as eight in a row, plus the hand-off to the pool's threads; the pool overlaps only "
        "the waits (see the 2 ms rows)."
    ),
    "fan_out_page": (
        "a fan-out's page reads eight answers (psycopg loading, the ORM's converters or "
        "result processors) and makes its 20 objects under one GIL on 2 shared cores, "
        "where one database reads one; see the fan-out page tables and their notes."
    ),
    "sqla_flush": (
        "the ids come from next_id() one call per row inside the shard's SELECT ... "
        "generate_series, so the flush pays the function's per-call cost (see the "
        "next_id() rows) on top of the same INSERTs."
    ),
    "pg_next_id": (
        "the common call reads the block's end and takes nextval() of an unlogged "
        "sequence (no lock, no subtransaction, no WAL, so no xid and no flush at commit); "
        "the first call of each millisecond takes a session advisory lock inside a "
        "BEGIN ... EXCEPTION block to start the next block, and moves the durable state "
        "half a second ahead about twice a second. The original only calls nextval() "
        "(one transaction in 32 waits for a flush) and repeats ids above 1024 per ms; its "
        "statements run through SPI (SELECT ... INTO) where ours are simple expressions. "
        "What stays between the two: the block read and the lock once per millisecond. "
        "The opt-in C function (next rows) keeps its state in shared memory, taken by "
        "compare-and-swap, with a ceiling flushed to the WAL twice a second; it needs "
        "the library in shared_preload_libraries on every shard."
    ),
    "keyed_writes": (
        "each row's key is placed once, when its object is built, and routing and the "
        "batch reuse that answer; what remains per row is making the id itself (with "
        "1000 distinct keys nearly every id is the first of its logical shard in its "
        "millisecond, so the generator starts a block for it), the ORM's hook that makes "
        "it (Django's post_init, SQLAlchemy's attribute event), the id column the plain "
        "model does not send, and, over 4 shards, one INSERT and one COMMIT per shard."
    ),
    "session_construction": (
        "Session.__init__ is most of a built session; what a sharded session adds is "
        "per session by nature: ShardedSession's choosers and shard binds, the settings' "
        "checks (skipped for defaults) and its read-your-writes pins. The router, the "
        "write guards and the do_orm_execute listener are made once per set of engines "
        "(or per class), not per session"
    ),
    "fan_out_delayed": (
        "each shard's query still costs about 0.5 ms of Python (compiling, binding, "
        "building rows) that the GIL runs one at a time on 2 cores; the 2 ms waits "
        "overlap, that CPU does not, so 8 shards come out near 4x, not 8x."
    ),
}


def _client_rates(rates: dict[str, float], function: str) -> list[tuple[int, float]]:
    """(clients, ``function``'s calls/s over the original's) for each pgbench run."""
    found = []
    for clients in (1, 8):
        ours, theirs = (
            rates.get(f"{function}, {clients} clients"),
            rates.get(f"instagram, {clients} clients"),
        )
        if ours and theirs:
            found.append((clients, ours / theirs))
    return found


def _pct(value: float) -> str:
    return f"{value:.1%}"


def targets(data: dict[str, Any]) -> Section:
    """Every target of the design with its measured value and whether it was met."""
    rows: list[list[str]] = []
    causes: dict[str, list[str]] = {}  # one cause, said once, for every target it explains

    def add(target: str, measured: str, met: bool, cause: str = "") -> None:
        rows.append([target, measured, "met" if met else "NOT MET"])
        if not met and cause:
            causes.setdefault(cause, []).append(target)

    single = data.get("single")
    if single:
        ours = single[GEN]
        peer = single.get("snowflake-id")
        if peer:
            add(
                "thread-safe next_id() faster than snowflake-id",
                f"{ours / 1e6:.2f} vs {peer / 1e6:.2f} M ids/s ({ours / peer:.2f}x)",
                ours > peer,
            )
        add(
            "next_id() >= 90% of the layout limit (4.096M ids/s)",
            _pct(ours / LIMIT),
            ours >= 0.9 * LIMIT,
        )
        batched = data["batched"][GEN]
        add("next_ids() >= 95% of the layout limit", _pct(batched / LIMIT), batched >= 0.95 * LIMIT)
        uuid4 = single["stdlib uuid.uuid4"]
        for name in (
            "uid_fields locality (variable)",
            "uid_fields locality (sequential)",
            "uid_fields decimal",
        ):
            add(
                f"{name.removeprefix('uid_fields ')} >= uuid4",
                f"{single[name] / uuid4:.2f}x uuid4",
                single[name] >= uuid4,
            )
    for key, label, cause, bound, server in (
        ("django_pg", "Django bulk_create", "django_insert", 1.05, "PostgreSQL"),
        ("django_mysql", "Django bulk_create", "django_insert", 1.1, "MariaDB"),
        ("sqla_pg", "SQLAlchemy Core insert", "sqla_insert", 1.0, "PostgreSQL"),
    ):
        times = data.get(key)
        if times:
            ratio = times["snowflake"] / times["identity"]
            add(
                f"{label}: Snowflake key <= {bound:g}x identity in time ({server})",
                f"{ratio:.2f}x",
                ratio <= bound,
                CAUSES[cause],
            )
    pg = data.get("pg_next_id") or {}
    # The PL/pgSQL default: at least half the original's rate, a bulk INSERT within 1.5x
    # its time; the C function: the original's rate and time.
    for function, label, cause, least, most in (
        ("uid_next_id()", "next_id()", CAUSES["pg_next_id"], 0.5, 1.5),
        ("uid_c_next_id()", "next_id() in C (opt-in)", "", 1.0, 1.0),
    ):
        if f"select {function}" not in pg:
            continue
        at_least = "" if least == 1 else f"{least:g}x "
        at_most = "" if most == 1 else f"{most:g}x "
        ours, original = pg[f"select {function}"], pg["select instagram"]
        add(
            f"{label} throughput >= {at_least}Instagram's original (1 session)",
            f"{original / ours:.2f}x the original's ids/s",
            original / ours >= least,
            cause,
        )
        for clients, rate in _client_rates(data.get("pg_next_id_clients") or {}, function):
            add(
                f"{label} calls/s >= {at_least}Instagram's original "
                f"(pgbench, {clients} client{'s' * (clients > 1)})",
                f"{rate:.2f}x the original's",
                rate >= least,
                cause,
            )
        ours, original = pg[f"insert, default {function}"], pg["insert, default instagram"]
        add(
            f"bulk INSERT with the {label} default <= {at_most}Instagram's original in time",
            f"{ours / original:.2f}x",
            ours / original <= most,
            cause,
        )
    flushed = data.get("sqla_flush")
    if flushed:
        ratio = flushed["database"] / flushed["python"]
        add(
            "SQLAlchemy flush with database-side ids <= 1.2x Python ids, one id statement "
            "per shard",
            f"{ratio:.2f}x, {flushed['fetches_per_shard']} per shard",
            ratio <= 1.2 and flushed["fetches_per_shard"] == 1,
            CAUSES["sqla_flush"],
        )
    keyed = data.get("django_keyed")
    if keyed:
        count = keyed.get("rows", 1000)
        for kind, label, bound in (
            ("keyed", f"Django keyed bulk_create({count}) <= 1.25x plain, one database", 1.25),
            (
                "snowflake4",
                f"Django Snowflake bulk_create({count}) over 4 shards <= 1.15x plain on one "
                "database",
                1.15,
            ),
        ):
            ratio = keyed[kind] / keyed["plain"]
            add(label, f"{ratio:.2f}x", ratio <= bound, CAUSES["keyed_writes"])
    keyed_flush = data.get("sqla_keyed_flush")
    if keyed_flush:
        ratio = keyed_flush["keyed"] / keyed_flush["plain"]
        add(
            f"SQLAlchemy keyed flush of {keyed_flush.get('rows', 1000)} objects <= 1.25x "
            "plain, one database",
            f"{ratio:.2f}x",
            ratio <= 1.25,
            CAUSES["keyed_writes"],
        )
    sizes = data.get("index_size")
    if sizes:
        add(
            "Snowflake pk index <= bigserial",
            f"{sizes['snowflake'] / 2**20:.1f} vs {sizes['identity'] / 2**20:.1f} MiB",
            sizes["snowflake"] <= sizes["identity"],
        )
        add(
            "Snowflake pk index < uuid4",
            f"{sizes['snowflake'] / 2**20:.1f} vs {sizes['uuid4'] / 2**20:.1f} MiB",
            sizes["snowflake"] < sizes["uuid4"],
        )
    routing = data.get("routing")
    if routing:
        queries = routing["queries"]
        add(
            "get(pk) over 8 shards runs 1 query, not 8",
            f"{queries['routed']:.1f} routed vs {queries['fan-out']:.1f} fan-out",
            queries["routed"] <= 1.0,
        )
        latency = routing["latency"]
        if "delayed" in latency:
            ratio = latency["fan-out"] / latency["routed"]
            add(
                "Django fan-out over 8 PostgreSQL shards <= 1.5x a routed query",
                f"{ratio:.2f}x",
                ratio <= 1.5,
                CAUSES["fan_out"],
            )
            speedup = latency["delayed, sequential"] / latency["delayed"]
            add(
                "with 2 ms per query, parallel fan-out >= 4x (of 8 shards) faster than sequential",
                f"{speedup:.1f}x",
                speedup >= 4,
                CAUSES["fan_out_delayed"],
            )
    sqla = data.get("sqla_routing")
    if sqla:
        ratio = sqla["fan-out"] / sqla["routed"]
        add(
            "SQLAlchemy fan-out over 8 PostgreSQL shards <= 1.5x a routed get",
            f"{ratio:.2f}x",
            ratio <= 1.5,
            CAUSES["fan_out"],
        )
        speedup = sqla["delayed, sequential"] / sqla["delayed"]
        add(
            "SQLAlchemy: with 2 ms per query, parallel fan-out >= 4x faster than sequential",
            f"{speedup:.1f}x",
            speedup >= 4,
            CAUSES["fan_out_delayed"],
        )
        if "new Session()" in sqla and "session" not in data:
            ratio = sqla["new sharded_session()"] / sqla["new Session()"]
            peer = sqla["new sharded_session()"] / sqla["new ShardedSession()"]
            add(
                "building sharded_session() <= 2x a plain Session()",
                f"{ratio:.2f}x ({sqla['new sharded_session()'] * 1e6:.1f} vs "
                f"{sqla['new Session()'] * 1e6:.1f} us; {peer:.2f}x SQLAlchemy's "
                "ShardedSession)",
                ratio <= 2,
                CAUSES["session_construction"],
            )
    session = data.get("session")
    if session:
        for figure, what in (("CPU", "built and closed"), ("build CPU", "built")):
            cpu = session[figure]
            ratio = cpu["sharded_session"] / cpu["Session"]
            add(
                f"sharded_session() (8 shards) {what} <= 2x a plain Session(), CPU time",
                f"{ratio:.2f}x ({cpu['sharded_session'] * 1e6:.1f} vs "
                f"{cpu['Session'] * 1e6:.1f} us; "
                f"{cpu['sharded_session'] / cpu['ShardedSession']:.2f}x SQLAlchemy's "
                "ShardedSession)",
                ratio <= 2,
                CAUSES["session_construction"],
            )
    page = data.get("fan_out_page") or {}
    for orm, label in (("django", "Django"), ("sqlalchemy", "SQLAlchemy")):
        times = page.get(orm)
        if not times:
            continue
        for wait, bound, text in (
            ("", 3.0, "loopback"),
            (", 1 ms wait", 2.0, "1 ms wait per query"),
        ):
            ratio = times[f"fan-out{wait}"] / times[f"one database{wait}"]
            add(
                f"{label}: order_by('-id')[:20] over 8 PostgreSQL shards <= {bound:g}x one "
                f"database ({text})",
                f"{ratio:.2f}x ({times[f'fan-out{wait}'] * 1e3:.2f} vs "
                f"{times[f'one database{wait}'] * 1e3:.2f} ms)",
                ratio <= bound,
                CAUSES["fan_out_page"],
            )
    public = data.get("public_ids")
    if public:
        worst = max(v for k, v in public.items() if k != "page of 100")
        add(
            "Public-id encode or decode < 10 us",
            f"{worst * 1e6:.2f} us (the slowest of encode/decode, id/UUID)",
            worst < 10e-6,
        )
        add(
            "a page of 100 public ids < 1 ms",
            f"{public['page of 100'] * 1e3:.2f} ms",
            public["page of 100"] < 1e-3,
        )
    notes = [f"{'; '.join(missed)}: {cause}" for cause, missed in causes.items()]
    return Section("targets", "Targets", ["target", "measured", "status"], rows, notes)


def text_table(section: Section) -> str:
    table = [section.columns, *[[str(cell) for cell in row] for row in section.rows]]
    widths = [max(len(row[i]) for row in table) for i in range(len(section.columns))]
    lines = [section.title, "-" * len(section.title)]
    for index, row in enumerate(table):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _md_table(section: Section) -> str:
    def cells(row: Sequence[Any]) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |"

    lines = [cells(section.columns), "|" + "---|" * len(section.columns)]
    lines += [cells(row) for row in section.rows]
    return "\n".join(lines)


def markdown(
    sections: Sequence[Section],
    *,
    date: str,
    machine: dict[str, str],
    versions: dict[str, str],
    chart_path: str | None,
    skipped: Sequence[str],
    elapsed: float,
    analysis: str,
) -> str:
    out = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`python -m tests.benchmarks`) from its last run; do not "
        "edit by hand. Each comparison runs its candidates alternately in one process, "
        "several rounds, and shows the median; ratios are what to read, since absolute "
        "numbers move with the machine.",
        "",
        f"- **Run:** {date} ({elapsed:.0f} s)",
        f"- **Machine:** {machine['cpu']}, {machine['cores']} cores, {machine['os']}",
        f"- **Python:** {machine['python']}",
        "- **Packages:** " + ", ".join(f"{k} {v}" for k, v in versions.items()),
    ]
    if skipped:
        out.append("- **Skipped:** " + "; ".join(skipped))
    out.append("")
    if chart_path:
        out += [f"![benchmark chart]({chart_path})", ""]
    for section in sections:
        out += [f"## {section.title}", "", _md_table(section), ""]
        for note in section.notes:
            out += [note, ""]
    out += [analysis.strip(), ""]
    return "\n".join(out)


def chart(data: dict[str, Any], path: Path) -> bool:
    """A PNG of the headline numbers; False if matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = [key for key in ("single", "threads", "inserts", "index_size") if _has(data, key)]
    if not panels:
        return False
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(9, 3.6 * len(panels)), squeeze=False, layout="constrained"
    )
    for ax, key in zip(axes[:, 0], panels, strict=True):
        if key == "single":
            items = sorted(data["single"].items(), key=lambda kv: kv[1])
            colors = [
                "tab:blue" if data["kinds"][name] == "uid_fields" else "tab:gray"
                for name, _ in items
            ]
            ax.barh([n for n, _ in items], [v / 1e6 for _, v in items], color=colors)
            ax.axvline(LIMIT / 1e6, color="tab:red", linestyle="--", label="Twitter layout limit")
            ax.set_xlabel("M ids/s, one thread, next_id() (blue: uid_fields)")
            ax.legend(loc="lower right")
            ax.tick_params(axis="y", labelsize=8)
        elif key == "threads":
            for name, by_count in data["threads"].items():
                if data["kinds"].get(name) == "uid_fields" and "uncapped" in name:
                    continue
                counts = sorted(by_count)
                style = "-" if data["kinds"].get(name) == "uid_fields" else ":"
                ax.plot(counts, [by_count[c] / 1e6 for c in counts], style, marker="o", label=name)
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(next(iter(data["threads"].values()))))
            ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.set_xlabel("threads sharing one generator")
            ax.set_ylabel("aggregate M ids/s")
            ax.legend(fontsize=6, ncol=2)
        elif key == "inserts":
            groups = [k for k in ("django_pg", "sqla_pg", "sqla_mysql") if data.get(k)]
            kinds = list(data[groups[0]])
            width = 0.8 / len(groups)
            for index, group in enumerate(groups):
                times = data[group]
                ax.bar(
                    [i + index * width for i in range(len(kinds))],
                    [times[k] / times["identity"] for k in kinds],
                    width,
                    label=group,
                )
            ax.set_xticks([i + width * (len(groups) - 1) / 2 for i in range(len(kinds))])
            ax.set_xticklabels([k.replace("_", "\n") for k in kinds], fontsize=8)
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_ylabel("insert time vs identity key")
            ax.legend()
        elif key == "index_size":
            sizes = data["index_size"]
            ax.bar([k.replace("_", "\n") for k in sizes], [v / 2**20 for v in sizes.values()])
            ax.set_ylabel("PostgreSQL pk index, MiB")
            ax.tick_params(axis="x", labelsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _has(data: dict[str, Any], key: str) -> bool:
    if key == "inserts":
        return any(data.get(k) for k in ("django_pg", "sqla_pg", "sqla_mysql"))
    return bool(data.get(key))
