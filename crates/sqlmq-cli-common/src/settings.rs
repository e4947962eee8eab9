//! Global options: flags, environment, TOML config file, and connecting with them.
//!
//! Precedence, highest first: command-line flag, environment variable, config file, built-in
//! default. clap merges the first two; the file is read here.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{ArgAction, Args};
use serde::Deserialize;
use sqlmq::{Backend, Client};
use sqlx::mysql::MySqlConnectOptions;
use tokio::net::TcpStream;

/// Database used when neither a flag, the environment nor the config file names one: a SQLite
/// file in the current directory, so that sqlmq runs with nothing installed.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://sqlmq.db";

/// Options accepted before or after any subcommand.
#[derive(Args, Debug)]
pub struct GlobalArgs {
    /// Database to use: sqlite://path/file.db (created when missing), sqlite::memory:, or
    /// mysql://user:password@host:port/database [default: sqlite://sqlmq.db]
    #[arg(
        long,
        env = "SQLMQ_DATABASE_URL",
        global = true,
        value_name = "URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,

    /// Prefix of sqlmq's tables [default: sqlmq_]
    #[arg(long, env = "SQLMQ_TABLE_PREFIX", global = true, value_name = "P")]
    pub table_prefix: Option<String>,

    /// Largest accepted message body in bytes [default: 1048576]
    #[arg(long, env = "SQLMQ_MAX_PAYLOAD_BYTES", global = true, value_name = "N")]
    pub max_payload_bytes: Option<usize>,

    /// Most database connections this process opens [default: 3 for consume and subscribe, 16
    /// otherwise]. Processes × connections must stay below the server's max_connections, with
    /// room for the application
    #[arg(long, env = "SQLMQ_MAX_CONNECTIONS", global = true, value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_connections: Option<u32>,

    /// How long a one-shot command (send, recv, …) waits for a database that is unreachable or
    /// at its connection limit before it gives up; also the longest wait for a pooled
    /// connection. consume, subscribe and serve wait for the database as long as it takes
    /// [default: 5s]
    #[arg(long, env = "SQLMQ_CONNECT_TIMEOUT", global = true, value_name = "DUR",
        value_parser = parse_timeout)]
    pub connect_timeout: Option<Duration>,

    /// TOML file with database_url, table_prefix, max_payload_bytes, max_connections and
    /// connect_timeout (flags and environment override it)
    #[arg(long, env = "SQLMQ_CONFIG", global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Log more to stderr (-v: info and one line per consumed message, -vv: debug); RUST_LOG
    /// overrides
    #[arg(short, long, action = ArgAction::Count, global = true)]
    pub verbose: u8,
}

/// The config file's keys; all optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    database_url: Option<String>,
    table_prefix: Option<String>,
    max_payload_bytes: Option<usize>,
    max_connections: Option<u32>,
    /// A duration such as `"5s"`.
    connect_timeout: Option<String>,
}

/// Default of `--connect-timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// `--connect-timeout`'s value: a positive duration such as `5s` or `500ms`.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("the connect timeout must be positive".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{e} (expected a duration such as 500ms, 5s or 1m)")),
    }
}

/// How long a command waits for an unavailable database when it connects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Patience {
    /// A one-shot command: up to the connect timeout, then an error naming the cause.
    Bounded,
    /// A long-running process (consume, subscribe, serve): as long as it takes.
    Unbounded,
}

/// A database sqlmq can use, as named by a URL scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// `mysql://` or `mariadb://`.
    MySql,
    /// `sqlite://` (a file) or `sqlite::memory:`.
    Sqlite,
}

/// The options in force after merging flags, environment, file and defaults.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where to connect.
    pub database_url: String,
    /// Table prefix.
    pub table_prefix: String,
    /// Payload limit; `None` keeps the library's default.
    pub max_payload_bytes: Option<usize>,
    /// Pool size; `None` keeps the command's default.
    pub max_connections: Option<u32>,
    /// How long a one-shot command waits for the database ([`Patience::Bounded`]).
    pub connect_timeout: Duration,
    /// `-v` count.
    pub verbose: u8,
    /// Whether no flag, environment variable or config file named the database, so that
    /// [`DEFAULT_DATABASE_URL`] is in use.
    pub defaulted: bool,
}

impl Settings {
    /// Merge the sources.
    pub fn resolve(args: &GlobalArgs) -> Result<Settings> {
        let file = match &args.config {
            Some(path) => read_config(path)?,
            None => FileConfig::default(),
        };
        let database_url = args.database_url.clone().or(file.database_url);
        Ok(Settings {
            defaulted: database_url.is_none(),
            database_url: database_url.unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned()),
            table_prefix: args
                .table_prefix
                .clone()
                .or(file.table_prefix)
                .unwrap_or_else(|| sqlmq::client::ClientBuilder::DEFAULT_TABLE_PREFIX.to_owned()),
            max_payload_bytes: args.max_payload_bytes.or(file.max_payload_bytes),
            max_connections: match args.max_connections.or(file.max_connections) {
                Some(0) => bail!("max_connections must be at least 1"),
                n => n,
            },
            connect_timeout: match (args.connect_timeout, file.connect_timeout) {
                (Some(d), _) => d,
                (None, Some(text)) => parse_timeout(&text).map_err(|e| {
                    anyhow::anyhow!("invalid connect_timeout in the config file: {e}")
                })?,
                (None, None) => DEFAULT_CONNECT_TIMEOUT,
            },
            verbose: args.verbose,
        })
    }

    /// The client builder these settings describe (its pool: `--max-connections`, else the
    /// library's default).
    pub fn builder(&self) -> sqlmq::client::ClientBuilder {
        self.builder_with_pool(sqlmq::client::ClientBuilder::DEFAULT_MAX_CONNECTIONS)
    }

    /// The client builder these settings describe, with a pool of `default_connections` unless
    /// `--max-connections` says otherwise.
    pub fn builder_with_pool(&self, default_connections: u32) -> sqlmq::client::ClientBuilder {
        let builder = sqlmq::Client::builder()
            .table_prefix(&self.table_prefix)
            .max_connections(self.max_connections.unwrap_or(default_connections))
            .connect_timeout(self.connect_timeout);
        match self.max_payload_bytes {
            Some(n) => builder.max_payload_bytes(n),
            None => builder,
        }
    }

    /// The backend the database URL's scheme names.
    pub fn backend(&self) -> Result<BackendKind> {
        let url = &self.database_url;
        if url.starts_with("sqlite:") {
            return Ok(BackendKind::Sqlite);
        }
        match url.split_once("://").map_or("", |(scheme, _)| scheme) {
            "mysql" | "mariadb" => Ok(BackendKind::MySql),
            _ => bail!(
                "cannot use {}: the database URL must start with sqlite:// (a file, created when \
                 missing), sqlite::memory:, mysql:// or mariadb://",
                redact(url)
            ),
        }
    }

    /// Say on stderr, once per process, that the default database is in use (no flag,
    /// environment variable or config file named one).
    fn announce_default(&self) {
        static ANNOUNCED: std::sync::Once = std::sync::Once::new();
        if self.defaulted {
            ANNOUNCED.call_once(|| {
                eprintln!(
                    "sqlmq: no database configured (--database-url, SQLMQ_DATABASE_URL or \
                     database_url in --config): using {DEFAULT_DATABASE_URL}, in the current \
                     directory"
                )
            });
        }
    }

    /// Connect to backend `B` with these settings (a SQLite database without sqlmq's tables
    /// gets them), waiting up to the connect timeout for an unavailable database.
    pub async fn connect<B: Backend>(&self) -> Result<Client<B>> {
        self.connect_with(self.builder(), Patience::Bounded).await
    }

    /// Connect with a builder derived from [`Settings::builder`] (to tune the pool). While the
    /// database is unreachable, at its connection limit or out of space, this waits and retries
    /// (logged once when the wait starts and once when it ends): for the connect timeout, or
    /// as long as it takes with [`Patience::Unbounded`]. Other errors (a bad password, an
    /// unknown database, an outdated schema) fail at once.
    pub async fn connect_with<B: Backend>(
        &self,
        builder: sqlmq::client::ClientBuilder,
        patience: Patience,
    ) -> Result<Client<B>> {
        let context = || format!("cannot use {}", redact(&self.database_url));
        self.announce_default();
        let outage = sqlmq::client::Outage::default();
        let started = Instant::now();
        let mut failures = 0u32;
        let client = loop {
            let failure = match self.open::<B>(builder.clone()).await {
                Ok(client) => break client,
                Err(Failure::Final(e)) => return Err(e.context(context())),
                Err(Failure::Transient(kind, e)) => (kind, e),
            };
            let (kind, error) = failure;
            outage.begin(kind, &error.to_string());
            failures += 1;
            let mut pause = sqlmq::client::Outage::pause(failures);
            if patience == Patience::Bounded {
                let left = self.connect_timeout.saturating_sub(started.elapsed());
                if left.is_zero() {
                    return Err(error.context(format!(
                        "{}: gave up after waiting {} (--connect-timeout)",
                        context(),
                        humantime::format_duration(round_ms(started.elapsed()))
                    )));
                }
                pause = pause.min(left);
            }
            tokio::time::sleep(pause).await;
        };
        outage.end();
        // A SQLite file with no schema is one this tool just created (or an empty one): set
        // it up, so that sqlmq works on a machine with nothing installed without a `migrate`
        // first. A server database is migrated explicitly, by whoever owns its schema.
        if self.backend()? == BackendKind::Sqlite && client.schema_version() == 0 {
            client.migrate().await.with_context(context)?;
            eprintln!(
                "sqlmq: created sqlmq's tables in {}",
                redact(&self.database_url)
            );
        }
        Ok(client)
    }

    /// One attempt to open a client.
    async fn open<B: Backend>(
        &self,
        builder: sqlmq::client::ClientBuilder,
    ) -> Result<Client<B>, Failure> {
        if self.backend().map_err(Failure::Final)? == BackendKind::MySql {
            reachable(&self.database_url, self.connect_timeout)
                .await
                .map_err(|e| Failure::Transient("unreachable", e))?;
        }
        builder.open::<B>(&self.database_url).await.map_err(
            |e| match sqlmq::client::Outage::kind_of(&e) {
                Some(kind) => Failure::Transient(kind, e.into()),
                None => Failure::Final(e.into()),
            },
        )
    }
}

/// Why an attempt to connect failed.
enum Failure {
    /// The database is unavailable for now (the outage kind): wait and try again.
    Transient(&'static str, anyhow::Error),
    /// Trying again cannot help.
    Final(anyhow::Error),
}

/// `d` to whole milliseconds, for messages.
fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

/// Fail fast, with the real cause, when the server cannot be reached at all (within `timeout`):
/// the pool would retry for its whole acquire timeout and then report only "pool timed out".
/// URLs that sqlx cannot parse or that name a Unix socket are left to the library.
async fn reachable(url: &str, timeout: Duration) -> Result<()> {
    let Ok(options) = url.parse::<MySqlConnectOptions>() else {
        return Ok(());
    };
    if options.get_socket().is_some() {
        return Ok(());
    }
    let (host, port) = (options.get_host(), options.get_port());
    match tokio::time::timeout(timeout, TcpStream::connect((host, port))).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => bail!("cannot reach the database server at {host}:{port}: {e}"),
        Err(_) => bail!(
            "cannot reach the database server at {host}:{port}: no answer within {}",
            humantime::format_duration(timeout)
        ),
    }
}

/// Read and parse the TOML config file; unknown keys are errors (they are usually typos).
fn read_config(path: &Path) -> Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    parse_config(&text).with_context(|| format!("invalid config file {}", path.display()))
}

/// The config file's text as settings (a typed error for anything else).
fn parse_config(text: &str) -> Result<FileConfig, toml::de::Error> {
    toml::from_str(text)
}

/// The URL with its password replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{path}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Hostile config files and URLs: a typed error or a value, never a panic; a password
        /// never shows in a redacted URL.
        #[test]
        fn config_text_and_urls_never_panic(
            text in prop_oneof![
                ".{0,200}",
                "(database_url|table_prefix|max_payload_bytes) = (\"[^\"]{0,30}\"|-?[0-9]{1,25}|true|\\[\\])\n{0,2}",
            ],
            user in "[a-z]{1,8}",
            password in "[A-Za-z0-9!$%&()*+,;=._~-]{1,16}",
            rest in "[a-z0-9.:/?=@-]{0,30}",
        ) {
            let _ = parse_config(&text);
            let url = format!("mysql://{user}:{password}@{rest}");
            let redacted = redact(&url);
            if !rest.contains('@') && !user.contains(&password) && !rest.contains(&password) {
                prop_assert!(!redacted.contains(&format!(":{password}@")), "{redacted}");
            }
            let _ = redact(&text);
        }
    }

    /// No flags but `--config path`.
    fn args_reading(path: &Path) -> GlobalArgs {
        GlobalArgs {
            database_url: None,
            table_prefix: None,
            max_payload_bytes: None,
            max_connections: None,
            connect_timeout: None,
            config: Some(path.to_owned()),
            verbose: 0,
        }
    }

    #[test]
    fn pool_size_and_connect_timeout_come_from_flags_or_the_file() {
        let dir = std::env::temp_dir().join(format!("sqlmq-cfg-pool-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        std::fs::write(&path, "max_connections = 4\nconnect_timeout = \"750ms\"\n").unwrap();
        let mut args = args_reading(&path);
        let s = Settings::resolve(&args).unwrap();
        assert_eq!(s.max_connections, Some(4));
        assert_eq!(s.connect_timeout, Duration::from_millis(750));
        args.max_connections = Some(2);
        args.connect_timeout = Some(Duration::from_secs(9));
        let s = Settings::resolve(&args).unwrap();
        assert_eq!(
            (s.max_connections, s.connect_timeout),
            (Some(2), Duration::from_secs(9))
        );
        args.config = None;
        args.max_connections = None;
        args.connect_timeout = None;
        let s = Settings::resolve(&args).unwrap();
        assert_eq!(
            (s.max_connections, s.connect_timeout),
            (None, DEFAULT_CONNECT_TIMEOUT)
        );
        for bad in [
            "max_connections = 0\n",
            "connect_timeout = \"soon\"\n",
            "connect_timeout = \"0s\"\n",
        ] {
            std::fs::write(&path, bad).unwrap();
            args.config = Some(path.clone());
            assert!(Settings::resolve(&args).is_err(), "{bad}");
        }
        assert!(parse_timeout("0s").is_err());
        assert_eq!(parse_timeout("2s"), Ok(Duration::from_secs(2)));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn redacts_only_the_password() {
        assert_eq!(
            redact("mysql://app:s3cr@t@db:3306/x"),
            "mysql://app:***@db:3306/x"
        );
        assert_eq!(redact("mysql://root@h/db"), "mysql://root@h/db");
        assert_eq!(redact("not a url"), "not a url");
    }

    #[test]
    fn the_scheme_picks_the_backend() {
        let with = |url: &str| Settings {
            database_url: url.into(),
            table_prefix: "sqlmq_".into(),
            max_payload_bytes: None,
            max_connections: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            verbose: 0,
            defaulted: false,
        };
        assert_eq!(
            with("sqlite://a.db").backend().unwrap(),
            BackendKind::Sqlite
        );
        assert_eq!(
            with("sqlite::memory:").backend().unwrap(),
            BackendKind::Sqlite
        );
        assert_eq!(with("mysql://h/db").backend().unwrap(), BackendKind::MySql);
        assert_eq!(
            with("mariadb://h/db").backend().unwrap(),
            BackendKind::MySql
        );
        let err = with("postgres://u:pw@h/db").backend().unwrap_err();
        assert!(format!("{err}").contains("sqlite://"), "{err}");
        assert!(!format!("{err}").contains("pw"), "{err}");
    }

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let dir = std::env::temp_dir().join(format!("sqlmq-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        std::fs::write(
            &path,
            "database_url = \"mysql://f/db\"\ntable_prefix = \"f_\"\nmax_payload_bytes = 10\n",
        )
        .unwrap();
        let mut args = GlobalArgs {
            table_prefix: Some("flag_".into()),
            ..args_reading(&path)
        };
        let s = Settings::resolve(&args).unwrap();
        assert_eq!(s.database_url, "mysql://f/db");
        assert_eq!(s.table_prefix, "flag_");
        assert_eq!(s.max_payload_bytes, Some(10));
        args.config = None;
        let s = Settings::resolve(&args).unwrap();
        assert_eq!(s.database_url, DEFAULT_DATABASE_URL);
        assert!(s.defaulted);
        assert_eq!(s.backend().unwrap(), BackendKind::Sqlite);
        std::fs::write(&path, "databse_url = \"typo\"\n").unwrap();
        args.config = Some(path);
        let err = Settings::resolve(&args).unwrap_err();
        assert!(format!("{err:#}").contains("unknown field"), "{err:#}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
