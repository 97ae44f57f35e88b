"""Every component's DuckDB schema, in one place: a list of migrations per component.

A migration is one block of SQL statements; :meth:`probekit.store.db.Store.ensure_schema` applies the
blocks a database has not seen yet, in order, and records the version in ``schema_version``. Append new
blocks, never edit applied ones: databases in the field have run them.

Keys: every per-run table (``run_results``, ``layer_results``, ``diskne_cells``, ``context_steps``) has a
foreign key to its run and a UNIQUE key on what identifies one of its rows, so a duplicate row or an orphan
is refused by the database itself. DuckDB cannot add a constraint to an existing table, so those keys came
with a migration that rebuilds the table (:func:`rebuild`: keep a copy, drop, create with the keys, copy
back each row once and only rows whose run exists, in the migration's one transaction). Two DuckDB rules
follow from foreign keys: a run's rows must be deleted in a transaction *before* the one deleting the run
(:meth:`probekit.store.db.Store.delete_with_children`, using :data:`CHILDREN`), and a table that another
references cannot be dropped (rebuild children, never parents).
"""

from __future__ import annotations

MIGRATIONS: dict[str, list[str]] = {}

CHILDREN: dict[str, tuple[str, ...]] = {
    "runs": ("run_results", "prompt_perplexity"),
    "layer_runs": ("layer_results",),
    "diskne_runs": ("diskne_cells",),
    "context_runs": ("context_steps",),
}
"""Per parent table, the tables holding its rows by ``run_id`` (deleted first; tables of components not
migrated in a database are skipped). ``prompt_perplexity`` (component ``templates``) has no foreign key:
components migrate independently, so keys never cross components."""


def rebuild(table: str, columns: str, *, key: str, parent: str, indexes: tuple[str, ...] = ()) -> str:
    """A migration block rebuilding ``table`` with ``columns`` (its full column list), ``UNIQUE (key)`` and
    a foreign key ``run_id -> parent``: rows are copied back once per key (the first stored wins) and only
    when their run exists (a row of a deleted run was unreachable anyway). ``indexes``: names to drop first."""
    old = f"{table}__pre_keys"
    return ";\n".join([
        f"CREATE TABLE {old} AS SELECT *, rowid AS pk_rowid FROM {table}",
        *(f"DROP INDEX IF EXISTS {name}" for name in indexes),
        f"DROP TABLE {table}",
        f"CREATE TABLE {table} ({columns}, UNIQUE ({key}), FOREIGN KEY (run_id) REFERENCES {parent} (run_id))",
        f"INSERT INTO {table} SELECT DISTINCT ON ({key}) * EXCLUDE (pk_rowid) FROM {old} "
        f"WHERE run_id IN (SELECT run_id FROM {parent}) ORDER BY {key}, pk_rowid",
        f"DROP TABLE {old}",
    ])


# benchmark runs: one row per run, one per query result
MIGRATIONS["runs"] = [
    """
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY, created_at TIMESTAMP NOT NULL, finished_at TIMESTAMP,
        status VARCHAR NOT NULL, settings_key VARCHAR NOT NULL, label VARCHAR,
        model VARCHAR NOT NULL, model_source VARCHAR, model_revision VARCHAR,
        dataset VARCHAR NOT NULL, dataset_version VARCHAR, dataset_set VARCHAR, dataset_spec VARCHAR,
        probe VARCHAR NOT NULL, options VARCHAR, vocab VARCHAR, k INTEGER, device VARCHAR,
        probekit_version VARCHAR, n_queries INTEGER, n_relations INTEGER, seconds DOUBLE, timings VARCHAR,
        message VARCHAR
    );
    CREATE TABLE run_results (
        run_id VARCHAR NOT NULL, query_id VARCHAR NOT NULL, relation VARCHAR NOT NULL, subject VARCHAR,
        template VARCHAR, query VARCHAR, golds VARCHAR, gold_ranks VARCHAR, best_gold_rank INTEGER,
        top_ids VARCHAR, top_names VARCHAR, top_scores VARCHAR, gold_length DOUBLE, hard BOOLEAN,
        n_candidates INTEGER
    );
    CREATE INDEX run_results_run ON run_results (run_id);
    CREATE INDEX runs_settings ON runs (settings_key)
    """,
    # 2: keys (one result per query of a run, no result without its run); a run's owner and heartbeat, so a
    # run whose process is gone is marked 'interrupted' instead of staying 'running' for ever
    rebuild("run_results", """
        run_id VARCHAR NOT NULL, query_id VARCHAR NOT NULL, relation VARCHAR NOT NULL, subject VARCHAR,
        template VARCHAR, query VARCHAR, golds VARCHAR, gold_ranks VARCHAR, best_gold_rank INTEGER,
        top_ids VARCHAR, top_names VARCHAR, top_scores VARCHAR, gold_length DOUBLE, hard BOOLEAN,
        n_candidates INTEGER""", key="run_id, query_id", parent="runs", indexes=("run_results_run",)) + """;
    ALTER TABLE runs ADD COLUMN owner_host VARCHAR;
    ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
    ALTER TABLE runs ADD COLUMN owner_start VARCHAR;
    ALTER TABLE runs ADD COLUMN heartbeat_at TIMESTAMP
    """,
    # 3: the counting convention of a run's reported acc@k ('query': any gold in the top k, MedLAMA's scripts;
    # 'triple': each (S, R, O) triple, LAMA / mLAMA) and the answers its method gives per query (X-FACTR's code:
    # 1, so no acc@10; NULL: no limit). Runs stored before counted queries.
    """
    ALTER TABLE runs ADD COLUMN counting VARCHAR DEFAULT 'query';
    ALTER TABLE runs ADD COLUMN answers_per_query INTEGER
    """,
    # 4: how the top-k was found when not by scoring every candidate (an approximate index over a built
    # vocabulary: kind, parameters, measured recall; probekit.types.Ranking.search); NULL: every candidate scored
    """
    ALTER TABLE runs ADD COLUMN search VARCHAR
    """,
]

# layer-wise probing: hit counts per layer, relation and subset
MIGRATIONS["layers"] = [
    """
    CREATE TABLE layer_runs (
        run_id VARCHAR PRIMARY KEY, created_at TIMESTAMP NOT NULL, settings_key VARCHAR NOT NULL, label VARCHAR,
        model VARCHAR NOT NULL, model_source VARCHAR, model_revision VARCHAR, dataset VARCHAR NOT NULL,
        dataset_version VARCHAR, dataset_set VARCHAR, dataset_spec VARCHAR, options VARCHAR, vocab VARCHAR,
        layers VARCHAR, device VARCHAR, probekit_version VARCHAR, n_queries INTEGER, seconds DOUBLE, timings VARCHAR
    );
    CREATE TABLE layer_results (
        run_id VARCHAR NOT NULL, layer INTEGER NOT NULL, relation VARCHAR NOT NULL, subset VARCHAR NOT NULL,
        n INTEGER NOT NULL, hits_1 INTEGER NOT NULL, hits_5 INTEGER NOT NULL, hits_10 INTEGER NOT NULL
    );
    CREATE INDEX layer_results_run ON layer_results (run_id);
    CREATE INDEX layer_runs_settings ON layer_runs (settings_key)
    """,
    # 2: subsets say which queries met which candidates. A full-set sweep's hard queries were ranked
    # among the full set's names: 'hard-in-full', not the hard set's experiment. A hard-set sweep's one block
    # is 'hard' (all its queries, among the hard set's own names); its old copy of the hard-flagged rows goes.
    """
    UPDATE layer_results SET subset = 'hard-in-full' WHERE subset = 'hard'
        AND run_id IN (SELECT run_id FROM layer_runs WHERE dataset_set IS DISTINCT FROM 'hard');
    DELETE FROM layer_results WHERE subset = 'hard'
        AND run_id IN (SELECT run_id FROM layer_runs WHERE dataset_set = 'hard');
    UPDATE layer_results SET subset = 'hard' WHERE subset = 'full'
        AND run_id IN (SELECT run_id FROM layer_runs WHERE dataset_set = 'hard')
    """,
    # 3: keys (one count per layer, relation and subset of a sweep; none without its sweep)
    rebuild("layer_results", """
        run_id VARCHAR NOT NULL, layer INTEGER NOT NULL, relation VARCHAR NOT NULL, subset VARCHAR NOT NULL,
        n INTEGER NOT NULL, hits_1 INTEGER NOT NULL, hits_5 INTEGER NOT NULL, hits_10 INTEGER NOT NULL""",
            key="run_id, layer, relation, subset", parent="layer_runs", indexes=("layer_results_run",)),
    # 4: each row's best gold ranks (JSON list, null = no gold ranked), so every registered metric, not only
    # acc@1/5/10, is computed from a stored sweep; sweeps stored before keep NULL and their hit counts
    """
    ALTER TABLE layer_results ADD COLUMN best_ranks VARCHAR
    """,
]

# expert annotation: sessions, queries, items, append-only rating events
MIGRATIONS["annotations"] = [
    """
    CREATE SEQUENCE annotation_event_seq START 1;
    CREATE TABLE annotation_sessions (
        session_id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, organiser VARCHAR, created_at TIMESTAMP NOT NULL,
        source VARCHAR NOT NULL, source_run VARCHAR, model VARCHAR, model_revision VARCHAR,
        dataset VARCHAR, dataset_version VARCHAR, probe VARCHAR, probe_options VARCHAR, vocab VARCHAR,
        relations VARCHAR, n_queries INTEGER NOT NULL, k INTEGER NOT NULL CHECK (k >= 1),
        blind BOOLEAN NOT NULL, raters_per_item INTEGER CHECK (raters_per_item IS NULL OR raters_per_item >= 1),
        seed BIGINT NOT NULL
    );
    CREATE TABLE annotation_queries (
        session_id VARCHAR NOT NULL, query_index INTEGER NOT NULL, query_id VARCHAR NOT NULL,
        relation VARCHAR NOT NULL, subject VARCHAR, template VARCHAR, query_text VARCHAR NOT NULL,
        golds VARCHAR NOT NULL, best_gold_rank INTEGER, n_candidates INTEGER,
        PRIMARY KEY (session_id, query_index)
    );
    CREATE TABLE annotation_items (
        item_id VARCHAR PRIMARY KEY, session_id VARCHAR NOT NULL, query_index INTEGER NOT NULL,
        display_order INTEGER NOT NULL, rank INTEGER NOT NULL, answer VARCHAR NOT NULL, answer_id BIGINT,
        model_score DOUBLE, is_gold BOOLEAN NOT NULL
    );
    CREATE TABLE annotation_annotators (
        session_id VARCHAR NOT NULL, annotator VARCHAR NOT NULL, display_name VARCHAR NOT NULL,
        joined_at TIMESTAMP NOT NULL, PRIMARY KEY (session_id, annotator)
    );
    CREATE TABLE annotation_assignments (
        session_id VARCHAR NOT NULL, annotator VARCHAR NOT NULL, query_index INTEGER NOT NULL,
        assigned_at TIMESTAMP NOT NULL, PRIMARY KEY (session_id, annotator, query_index)
    );
    CREATE TABLE annotation_events (
        event_id BIGINT PRIMARY KEY DEFAULT nextval('annotation_event_seq'),
        session_id VARCHAR NOT NULL, item_id VARCHAR NOT NULL, annotator VARCHAR NOT NULL,
        kind VARCHAR NOT NULL CHECK (kind IN ('rate', 'skip', 'undo')),
        score INTEGER CHECK (score BETWEEN 1 AND 5),
        supersedes BIGINT, elapsed_ms BIGINT CHECK (elapsed_ms IS NULL OR elapsed_ms >= 0),
        created_at TIMESTAMP NOT NULL,
        CHECK ((kind = 'rate') = (score IS NOT NULL)),
        CHECK (kind <> 'undo' OR supersedes IS NOT NULL)
    );
    CREATE INDEX annotation_items_session ON annotation_items (session_id);
    CREATE INDEX annotation_events_session ON annotation_events (session_id);
    CREATE VIEW annotation_current AS
        SELECT event_id, session_id, item_id, annotator, kind, score, supersedes, elapsed_ms, created_at
        FROM (
            SELECT e.*, row_number() OVER (PARTITION BY e.item_id, e.annotator ORDER BY e.event_id DESC) AS rn
            FROM annotation_events e
            WHERE e.kind IN ('rate', 'skip')
              AND NOT EXISTS (SELECT 1 FROM annotation_events u
                              WHERE u.kind = 'undo' AND u.supersedes = e.event_id)
        ) WHERE rn = 1
    """,
    # 2: whether a session's answers leave out the query's own subject (None: not recorded, e.g. older sessions)
    """
    ALTER TABLE annotation_sessions ADD COLUMN exclude_subject BOOLEAN
    """,
    # 3: per-session, per-expert access tokens (sha256 of the token only; revoked by setting revoked_at)
    """
    CREATE TABLE annotation_tokens (
        token_hash VARCHAR PRIMARY KEY, session_id VARCHAR NOT NULL, annotator VARCHAR NOT NULL,
        created_at TIMESTAMP NOT NULL, revoked_at TIMESTAMP
    );
    CREATE INDEX annotation_tokens_session ON annotation_tokens (session_id, annotator)
    """,
    # 4: the rule that chose a session's queries and its parameters (JSON; None: a sample, as before)
    """
    ALTER TABLE annotation_sessions ADD COLUMN selection VARCHAR
    """,
    # 5: a reviewer's verdicts on disputed answers: append-only rows beside the ratings (never replacing one);
    # the latest per answer is in effect
    """
    CREATE TABLE annotation_verdicts (
        event_id BIGINT PRIMARY KEY DEFAULT nextval('annotation_event_seq'),
        session_id VARCHAR NOT NULL, item_id VARCHAR NOT NULL, reviewer VARCHAR NOT NULL,
        role VARCHAR NOT NULL DEFAULT 'reviewer' CHECK (role = 'reviewer'),
        score INTEGER NOT NULL CHECK (score BETWEEN 1 AND 5), note VARCHAR, created_at TIMESTAMP NOT NULL
    );
    CREATE INDEX annotation_verdicts_session ON annotation_verdicts (session_id)
    """,
    # 6: every key press an expert's browser window sent, once: (session, expert, window, press number) is the
    # key, so a press re-sent after a server restart is recognised by the database; event_id is the event it
    # produced (NULL: it changed nothing, e.g. Enter), written in that event's transaction
    """
    CREATE TABLE annotation_presses (
        session_id VARCHAR NOT NULL, annotator VARCHAR NOT NULL, client VARCHAR NOT NULL,
        seq BIGINT NOT NULL CHECK (seq >= 1), key VARCHAR NOT NULL, event_id BIGINT, created_at TIMESTAMP NOT NULL,
        PRIMARY KEY (session_id, annotator, client, seq)
    )
    """,
    # 7: a link's role: 'expert' (rates answers; every link issued before is one) or 'reviewer' (records verdicts
    # on the session's disputed answers); a reviewer is not an annotator of the session, so the link keeps the
    # reviewer's name as typed (NULL for an expert: theirs is in annotation_annotators). DuckDB alters no table
    # that an index depends on, so the index goes first and comes back after.
    """
    DROP INDEX annotation_tokens_session;
    ALTER TABLE annotation_tokens ADD COLUMN role VARCHAR NOT NULL DEFAULT 'expert';
    ALTER TABLE annotation_tokens ADD COLUMN display_name VARCHAR;
    CREATE INDEX annotation_tokens_session ON annotation_tokens (session_id, annotator)
    """,
]

# context variance (UCM) dataset runs: one row per step
MIGRATIONS["context"] = [
    """
    CREATE TABLE context_runs (
        run_id VARCHAR PRIMARY KEY, created_at TIMESTAMP NOT NULL, label VARCHAR, model VARCHAR NOT NULL,
        model_source VARCHAR, model_revision VARCHAR, probe VARCHAR NOT NULL, dataset VARCHAR,
        dataset_version VARCHAR, variant VARCHAR, seed INTEGER, n_queries INTEGER, seconds DOUBLE,
        settings VARCHAR
    );
    CREATE TABLE context_steps (
        run_id VARCHAR NOT NULL, mode VARCHAR NOT NULL, query_id VARCHAR NOT NULL, relation VARCHAR NOT NULL,
        subject VARCHAR, target VARCHAR, permutation INTEGER, step INTEGER NOT NULL, added VARCHAR,
        added_role VARCHAR, rank_target INTEGER, rank_added INTEGER, mean_rank_cor DOUBLE, mean_rank_incor DOUBLE,
        rc_target INTEGER, rc_added INTEGER, rc_cor DOUBLE, rc_incor DOUBLE, best_gold_rank INTEGER, notice VARCHAR
    );
    CREATE INDEX context_steps_run ON context_steps (run_id)
    """,
    # dataset mode on real contexts: a triple may have several contexts (documents); KB runs have one (0)
    "ALTER TABLE context_steps ADD COLUMN context INTEGER DEFAULT 0",
    # 3: keys (one row per step of a context sequence; none without its run)
    rebuild("context_steps", """
        run_id VARCHAR NOT NULL, mode VARCHAR NOT NULL, query_id VARCHAR NOT NULL, relation VARCHAR NOT NULL,
        subject VARCHAR, target VARCHAR, permutation INTEGER, step INTEGER NOT NULL, added VARCHAR,
        added_role VARCHAR, rank_target INTEGER, rank_added INTEGER, mean_rank_cor DOUBLE, mean_rank_incor DOUBLE,
        rc_target INTEGER, rc_added INTEGER, rc_cor DOUBLE, rc_incor DOUBLE, best_gold_rank INTEGER, notice VARCHAR,
        context INTEGER DEFAULT 0""", key="run_id, mode, query_id, target, context, permutation, step",
            parent="context_runs", indexes=("context_steps_run",)),
]
# probing grids: one row per grid, one per cell (the driver alone writes them)
MIGRATIONS["grid"] = [
    """
    CREATE TABLE grid_runs (
        grid_id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL, spec VARCHAR NOT NULL,
        n_cells INTEGER NOT NULL
    );
    CREATE TABLE grid_cells (
        grid_id VARCHAR NOT NULL, cell_key VARCHAR NOT NULL, position INTEGER NOT NULL, label VARCHAR,
        settings VARCHAR NOT NULL, PRIMARY KEY (grid_id, cell_key)
    );
    CREATE SEQUENCE grid_event_seq START 1;
    CREATE TABLE grid_events (
        event_id BIGINT PRIMARY KEY DEFAULT nextval('grid_event_seq'), grid_id VARCHAR NOT NULL,
        cell_key VARCHAR NOT NULL, status VARCHAR NOT NULL CHECK (status IN ('done', 'failed')),
        run_id VARCHAR, error VARCHAR, seconds DOUBLE, worker VARCHAR, backend VARCHAR, created_at TIMESTAMP NOT NULL
    );
    CREATE INDEX grid_events_grid ON grid_events (grid_id)
    """,
]

# DisKnE (probekit.diskne): one row per fine-tuned model run, one per (disease, seed, category) cell
MIGRATIONS["diskne"] = [
    """
    CREATE TABLE diskne_runs (
        run_id VARCHAR PRIMARY KEY, created_at TIMESTAMP NOT NULL, finished_at TIMESTAMP, status VARCHAR NOT NULL,
        settings_key VARCHAR NOT NULL, label VARCHAR NOT NULL, model VARCHAR NOT NULL, model_revision VARCHAR,
        set_name VARCHAR, set_version VARCHAR, set_path VARCHAR, categories VARCHAR, seeds VARCHAR,
        finetune VARCHAR, n_negatives INTEGER, negatives VARCHAR, device VARCHAR, n_cells INTEGER,
        seconds DOUBLE, message VARCHAR
    );
    CREATE TABLE diskne_cells (
        run_id VARCHAR NOT NULL, target VARCHAR NOT NULL, disease VARCHAR, seed INTEGER NOT NULL,
        category VARCHAR NOT NULL, f1 DOUBLE, "precision" DOUBLE, recall DOUBLE, tp INTEGER, fp INTEGER,
        fn INTEGER, tn INTEGER, support INTEGER, epochs INTEGER, best_epoch INTEGER, train_examples INTEGER,
        validation_examples INTEGER, seconds DOUBLE, history VARCHAR
    );
    CREATE INDEX diskne_cells_run ON diskne_cells (run_id)
    """,
    # 2: keys (one cell per disease, seed and category of a run; none without its run)
    rebuild("diskne_cells", """
        run_id VARCHAR NOT NULL, target VARCHAR NOT NULL, disease VARCHAR, seed INTEGER NOT NULL,
        category VARCHAR NOT NULL, f1 DOUBLE, "precision" DOUBLE, recall DOUBLE, tp INTEGER, fp INTEGER,
        fn INTEGER, tn INTEGER, support INTEGER, epochs INTEGER, best_epoch INTEGER, train_examples INTEGER,
        validation_examples INTEGER, seconds DOUBLE, history VARCHAR""", key="run_id, target, seed, category",
            parent="diskne_runs", indexes=("diskne_cells_run",)),
    # 3: a run's owner and heartbeat (probekit.store.owner): a killed run is 'interrupted', not 'running' for ever
    """
    ALTER TABLE diskne_runs ADD COLUMN owner_host VARCHAR;
    ALTER TABLE diskne_runs ADD COLUMN owner_pid INTEGER;
    ALTER TABLE diskne_runs ADD COLUMN owner_start VARCHAR;
    ALTER TABLE diskne_runs ADD COLUMN heartbeat_at TIMESTAMP
    """,
]

# template-based vs template-free (probekit.templates.stored): per-prompt perplexity of a stored run's prompts,
# by a scorer model (pseudo-perplexity for masked LMs, perplexity for causal LMs); several scorers per run
MIGRATIONS["templates"] = [
    """
    CREATE TABLE prompt_perplexity (
        run_id VARCHAR NOT NULL, query_id VARCHAR NOT NULL, scorer VARCHAR NOT NULL, scorer_revision VARCHAR,
        method VARCHAR NOT NULL CHECK (method IN ('pseudo', 'causal')),
        fill VARCHAR NOT NULL CHECK (fill IN ('gold', 'mask')), text VARCHAR NOT NULL,
        n_tokens INTEGER NOT NULL, nll DOUBLE NOT NULL, perplexity DOUBLE, created_at TIMESTAMP NOT NULL,
        PRIMARY KEY (run_id, query_id, scorer, method, fill)
    );
    CREATE INDEX prompt_perplexity_run ON prompt_perplexity (run_id)
    """,
]

# tours (probekit.tours): a named, ordered list of saved views (a page and its share link's parameters) to present
MIGRATIONS["tours"] = [
    """
    CREATE TABLE tours (
        name VARCHAR PRIMARY KEY, created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL
    );
    CREATE TABLE tour_steps (
        tour VARCHAR NOT NULL, position INTEGER NOT NULL CHECK (position >= 0), page VARCHAR NOT NULL,
        params VARCHAR NOT NULL, title VARCHAR NOT NULL, note VARCHAR NOT NULL DEFAULT '',
        PRIMARY KEY (tour, position)
    )
    """,
]
