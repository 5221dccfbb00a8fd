//! Reading stored runs without resuming them: from the SQLite store or a NATS class's
//! journal, with run ids resolved from a prefix.

use super::args::{EngineArg, EngineKind, ReadArgs};
use super::fail::{Fail, internal, invalid};
#[cfg(feature = "nats")]
use super::store::nats_options;
use super::store::{db_path, memory_keeps_nothing, open_store};
use crate::backend::Backend;
#[cfg(feature = "nats")]
use crate::history::StoredRunView;
use crate::workflow::Workflow;
use std::sync::Arc;
/// An open store to read runs from, and where it is (for messages).
pub(super) struct Reader {
    pub(super) backend: Arc<dyn Backend>,
    pub(super) place: String,
    /// The connection, on NATS (to read a live run's owner record).
    #[cfg(feature = "nats")]
    pub(super) nats: Option<saap_nats::SaapNats>,
}
#[cfg(feature = "nats")]
pub(super) struct NatsReader {
    pub(super) backend: Arc<dyn Backend>,
    pub(super) place: String,
    pub(super) nats: crate::nats::NatsBackend,
}

/// Opens the agent class's journal on NATS for reading.
#[cfg(feature = "nats")]
pub(super) async fn open_nats_reader(
    workflow: &Workflow,
    url: &str,
    from: &ReadArgs,
) -> Result<(NatsReader, crate::nats::NatsOptions), Fail> {
    let opts = nats_options(url, &from.nats)?;
    let nats = saap_nats::SaapNats::connect(&opts)
        .await
        .map_err(|e| internal(opts.sanitize(&e.to_string())))?;

    let backend = crate::nats::NatsBackend::open(
        nats,
        workflow.name(),
        workflow.compiled().hierarchy.clone(),
        crate::nats::NatsBackendOptions {
            publish_outputs: false,
            ..Default::default()
        },
    )
    .await
    .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
    let reader = NatsReader {
        backend: Arc::new(backend.clone()),
        place: format!(
            "the journal of class `{}` on {}",
            workflow.name(),
            opts.redacted_servers()
        ),
        nats: backend,
    };
    Ok((reader, opts))
}

#[cfg(feature = "nats")]
pub(super) async fn read_view(
    workflow: &Workflow,
    reader: &NatsReader,
    run_id: &str,
) -> Result<StoredRunView, Fail> {
    let stored = reader
        .backend
        .read_run(workflow.name(), run_id)
        .wait()
        .await
        .map_err(|e| internal(e.to_string()))?
        .ok_or_else(|| internal(format!("run `{run_id}` vanished from {}", reader.place)))?;
    StoredRunView::rebuild(workflow, &stored).map_err(|e| internal(e.to_string()))
}

/// The store `runs`/`show` read; `None`: the database does not exist (no runs yet).
pub(super) async fn open_reader(
    workflow: &Workflow,
    from: &ReadArgs,
) -> Result<Option<Reader>, Fail> {
    match &from.engine {
        EngineArg::Local(EngineKind::Memory) => Err(memory_keeps_nothing("runs/show")),
        EngineArg::Local(EngineKind::Sqlite) => {
            let path = db_path(workflow, &from.store);
            if !path.exists() {
                return Ok(None);
            }
            Ok(Some(Reader {
                backend: open_store(&path)?,
                place: path.display().to_string(),
                #[cfg(feature = "nats")]
                nats: None,
            }))
        }
        #[cfg(feature = "nats")]
        EngineArg::Nats(url) => {
            let (r, _) = open_nats_reader(workflow, url, from).await?;
            Ok(Some(Reader {
                backend: r.backend,
                place: r.place,
                nats: Some(r.nats.nats().clone()),
            }))
        }
        #[cfg(not(feature = "nats"))]
        EngineArg::Nats(_) => Err(invalid(
            "this agent was built without the `nats` feature of saap",
        )),
    }
}

pub(super) fn where_runs(from: &ReadArgs, workflow: &Workflow) -> String {
    match &from.engine {
        EngineArg::Nats(url) => format!("the class `{}` on {url}", workflow.name()),
        EngineArg::Local(_) => db_path(workflow, &from.store).display().to_string(),
    }
}

/// A stored run a user named, read whole ([`read_named_run`]).
pub(super) struct NamedRun {
    /// The reader, its store let go (on NATS, its connection tells a live run's owner).
    pub(super) reader: Reader,
    /// The agent whose run it is: this one, or one it delegates to.
    pub(super) agent: Workflow,
    pub(super) run_id: String,
    pub(super) stored: crate::backend::StoredRun,
    /// The effects its bodies journaled.
    pub(super) effects: Vec<crate::backend::EffectRecord>,
}

/// The stored run a user named (its id or a unique prefix; a run of this agent or of one
/// it delegates to), read whole with its effects, the store let go after.
pub(super) async fn read_named_run(
    workflow: &Workflow,
    from: &ReadArgs,
    given: &str,
) -> Result<NamedRun, Fail> {
    let Some(reader) = open_reader(workflow, from).await? else {
        return Err(invalid(format!(
            "no stored run `{}` of `{}`: there is no database {}; start a run with `run`, or pass --db PATH",
            given.chars().take(64).collect::<String>(),
            workflow.name(),
            where_runs(from, workflow)
        )));
    };
    let (agent, run_id) =
        resolve_agent_run(workflow, &reader.backend, &reader.place, given).await?;
    let stored = reader
        .backend
        .read_run(agent.name(), &run_id)
        .wait()
        .await
        .map_err(|e| internal(e.to_string()))?
        .ok_or_else(|| internal(format!("run `{run_id}` vanished from {}", reader.place)))?;
    let effects = reader
        .backend
        .effects(&run_id)
        .wait()
        .await
        .map_err(|e| internal(e.to_string()))?;
    reader.backend.halt();
    Ok(NamedRun {
        reader,
        agent,
        run_id,
        stored,
        effects,
    })
}

/// The embedded engine that holds stored run `given` (its id or a unique prefix), opened to
/// act on it (`send`, `cancel`, `resume`): the engine of the run's agent (a child run of an
/// agent this one delegates to is acted on through that agent's engine), the engine opened
/// (whose telemetry the command flushes), and the run's id. `no_db` ends the message for a
/// database that does not exist ("start a run first with `run`").
pub(super) async fn engine_of_run(
    workflow: &Workflow,
    kind: EngineKind,
    store: &super::args::StoreArgs,
    given: &str,
    no_db: &str,
) -> Result<(crate::Engine, crate::Engine, String), Fail> {
    let path = db_path(workflow, store);
    if !path.exists() {
        return Err(invalid(format!("no database {}; {no_db}", path.display())));
    }
    let opened = super::store::open_engine(workflow, kind, store).await?;
    let place = path.display().to_string();
    let (agent, run_id) = resolve_agent_run(workflow, opened.backend(), &place, given).await?;
    let engine = opened.agent(agent.name()).unwrap_or_else(|| opened.clone());
    Ok((engine, opened, run_id))
}

/// As [`resolve_run`], among the runs of this agent and then of the agents it delegates to
/// (a child run waiting for a human is answered through its parent's program): the agent
/// whose run it is, and the id. The error is this agent's when no agent has the run.
pub(super) async fn resolve_agent_run(
    workflow: &Workflow,
    backend: &Arc<dyn Backend>,
    place: &str,
    given: &str,
) -> Result<(Workflow, String), Fail> {
    let first = match resolve_run(workflow, backend, place, given).await {
        Ok(id) => return Ok((workflow.clone(), id)),
        Err(e) => e,
    };
    for agent in workflow.agent_set().into_iter().skip(1) {
        if let Ok(id) = resolve_run(&agent, backend, place, given).await {
            return Ok((agent, id));
        }
    }
    Err(first)
}

/// The run id a user typed (the id or a unique prefix), looked up in the store.
pub(super) async fn resolve_run(
    workflow: &Workflow,
    backend: &Arc<dyn Backend>,
    place: &str,
    given: &str,
) -> Result<String, Fail> {
    let shown: String = given.chars().take(64).collect();
    if given.is_empty() {
        return Err(invalid(
            "the run id is empty; list the runs with `runs` (`runs --status live` for waiting ones)",
        ));
    }
    let query = crate::backend::RunQuery {
        id_prefix: Some(given.to_string()),
        limit: 2,
        ..Default::default()
    };
    let page = backend
        .list_runs(workflow.name(), &query)
        .wait()
        .await
        .map_err(|e| internal(e.to_string()))?;
    match page.runs.as_slice() {
        [one] if !page.more => Ok(one.run_id.clone()),
        [] => Err(invalid(format!(
            "no stored run `{shown}` of `{}` in {place}; list the runs with `runs` (`runs --status live` for waiting ones)",
            workflow.name()
        ))),
        _ => Err(invalid(format!(
            "`{shown}` matches several runs of `{}` in {place}; give more of the run id (see `runs`)",
            workflow.name()
        ))),
    }
}
