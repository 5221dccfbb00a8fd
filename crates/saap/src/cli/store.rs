//! Where an agent's runs are kept: the default database path, opening the SQLite store or
//! an engine over it, and NATS connection options.

#[cfg(feature = "nats")]
use super::args::NatsArgs;
use super::args::{EngineKind, StoreArgs};
use super::fail::{Fail, internal, invalid};
use crate::backend::Backend;
use crate::backend::sqlite::SqliteBackend;
use crate::engine::{Engine, EngineOptions};
use crate::workflow::Workflow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
/// The default database of an agent: `<state dir>/<agent>.db`.
pub fn default_db(workflow: &Workflow) -> PathBuf {
    let dir = if let Some(d) = std::env::var_os("SAAP_STATE_DIR").filter(|d| !d.is_empty()) {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(d).join("saap")
    } else if let Some(h) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(h).join(".local/state/saap")
    } else {
        PathBuf::from(".saap")
    };
    let file: String = workflow
        .name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();

    dir.join(format!("{file}.db"))
}

pub(super) fn db_path(workflow: &Workflow, store: &StoreArgs) -> PathBuf {
    store.db.clone().unwrap_or_else(|| default_db(workflow))
}

pub(super) fn open_store(path: &Path) -> Result<Arc<dyn Backend>, Fail> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            internal(format!(
                "cannot create the state directory `{}`: {e}; pass --db PATH or set SAAP_STATE_DIR",
                dir.display()
            ))
        })?;
    }
    let backend = SqliteBackend::open(path).map_err(|e| internal(e.to_string()))?;
    Ok(Arc::new(backend))
}

pub(super) async fn open_engine(
    workflow: &Workflow,
    kind: EngineKind,
    store: &StoreArgs,
) -> Result<Engine, Fail> {
    open_engine_with(workflow, kind, store, engine_options(workflow)?).await
}

/// [`open_engine`] with these options.
pub(super) async fn open_engine_with(
    workflow: &Workflow,
    kind: EngineKind,
    store: &StoreArgs,
    opts: EngineOptions,
) -> Result<Engine, Fail> {
    Ok(match kind {
        EngineKind::Memory => Engine::new(
            workflow.clone(),
            Arc::new(crate::backend::memory::MemoryBackend::new()),
            opts,
        ),
        EngineKind::Sqlite => {
            let path = db_path(workflow, store);
            let backend = open_store(&path)?;
            let (engine, recovery) = Engine::open(workflow.clone(), backend, opts)
                .await
                .map_err(|e| internal(e.to_string()))?;
            if recovery.resumed_runs > 0 {
                eprintln!(
                    "resumed {} live run(s) found in {} ({} execution(s) re-run)",
                    recovery.resumed_runs,
                    path.display(),
                    recovery.retried_executions
                );
            }
            for f in &recovery.failed {
                eprintln!("warning: {f}");
            }
            engine
        }
    })
}

/// The engine's options: the defaults, and live export of runs as traces when the standard
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) is set.
pub(super) fn engine_options(workflow: &Workflow) -> Result<EngineOptions, Fail> {
    #[allow(unused_mut)]
    let mut opts = EngineOptions::default();
    #[cfg(feature = "otel")]
    if let Some(config) = saap_otel::OtlpConfig::from_env().map_err(|e| invalid(e.to_string()))? {
        let endpoint = config.endpoint.clone();
        let config = config.service_name(workflow.name());
        opts.telemetry =
            Some(saap_otel::Exporter::start(config).map_err(|e| internal(e.to_string()))?);
        eprintln!("exporting runs as traces to {endpoint}");
    }
    #[cfg(not(feature = "otel"))]
    let _ = workflow;
    Ok(opts)
}

/// Sends what the engine's trace exporter still holds (at most 5 s), saying what was lost.
pub(super) fn flush_telemetry(engine: &Engine) {
    #[cfg(feature = "otel")]
    if let Some(exporter) = engine.telemetry() {
        if let Err(e) = exporter.flush(std::time::Duration::from_secs(5)) {
            eprintln!("warning: {e}");
        }
        let stats = exporter.stats();
        if stats.dropped_jobs > 0 || stats.failed_spans > 0 {
            eprintln!(
                "warning: trace export lost {} span batch(es) to a full queue and {} span(s) the receiver refused",
                stats.dropped_jobs, stats.failed_spans
            );
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = engine;
}

/// The connection options of `--engine nats://…` and the credential/TLS flags.
#[cfg(feature = "nats")]
pub(super) fn nats_options(url: &str, n: &NatsArgs) -> Result<crate::nats::NatsOptions, Fail> {
    crate::nats::EngineConnect {
        url: url.to_string(),
        token_env: n.nats_token_env.clone(),
        user: n.nats_user.clone(),
        password_env: n.nats_password_env.clone(),
        nkey_seed_file: n.nats_nkey_seed_file.clone(),
        creds_file: n.nats_creds.clone(),
        tls_ca: n.nats_tls_ca.clone(),
        tls_cert: n.nats_tls_cert.clone(),
        tls_key: n.nats_tls_key.clone(),
        tls_required: n.nats_tls_required,
    }
    .options()
    .map_err(|e| invalid(e.to_string()))
}

pub(super) fn memory_keeps_nothing(cmd: &str) -> Fail {
    invalid(format!(
        "`{cmd}` reads stored runs, and the memory engine keeps none: use --engine sqlite (the default) or --engine nats://HOST:PORT"
    ))
}
