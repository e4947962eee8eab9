//! TLS to the database: private `mariadbd`s with a certificate authority and certificates
//! generated at test time (`openssl`) and `require_secure_transport=ON`, as most managed MySQL
//! services run. Queues and topics work over it with `ssl-mode` and `ssl-ca` in the URL; a
//! plain connection is refused by the server; `VERIFY_CA` refuses another authority and
//! `VERIFY_IDENTITY` a certificate made out to another host name. The certificates of the
//! MySQL and MariaDB manuals' openssl recipe (X.509 v1: no extensions, the host name in the CN
//! only) work with `PREFERRED`, `REQUIRED`, `VERIFY_CA` and `VERIFY_IDENTITY`; a user created
//! `REQUIRE X509` connects with `ssl-cert`/`ssl-key` (PKCS#8 or PKCS#1 key) and is refused
//! without them. Notifications' binary-log follower goes live over the same TLS.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use sqlmq::topic::StartAt;
use sqlmq::{Client, GroupConfig, Message, QueueConfig, Record, TopicConfig};
use sqlx::{Connection, Row};

use sqlmq_testkit::PrivateServer;

/// The host name the server's certificate is made out to (not the address the tests dial).
const CERT_HOST: &str = "db.sqlmq.test";

/// The files `openssl` made: the server's authority, another one, and the server's pair.
struct Certs {
    ca: PathBuf,
    other_ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs (scripts/test.sh installs it)");
    assert!(status.success(), "openssl {args:?} failed");
}

/// A self-signed CA in `dir`: `{name}.pem` and `{name}-key.pem`, with subject `cn`.
fn make_ca(dir: &Path, name: &str, cn: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            cn,
            "-keyout",
            &format!("{name}-key.pem"),
            "-out",
            &format!("{name}.pem"),
        ],
    );
}

/// A CA, another CA, and a server certificate for [`CERT_HOST`] signed by the first.
fn make_certs(dir: &Path) -> Certs {
    make_ca(dir, "ca", "/CN=sqlmq test CA");
    make_ca(dir, "other-ca", "/CN=another CA");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={CERT_HOST}"),
            "-keyout",
            "server-key.pem",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(
        dir.join("server.ext"),
        format!(
            "subjectAltName=DNS:{CERT_HOST}\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
        ),
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ],
    );
    Certs {
        ca: dir.join("ca.pem"),
        other_ca: dir.join("other-ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server-key.pem"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_and_topics_run_over_tls_and_the_server_identity_is_checked() {
    let mut server = PrivateServer::install();
    let certs = make_certs(server.dir());
    server.start_with(&[
        format!("--ssl-ca={}", certs.ca.display()),
        format!("--ssl-cert={}", certs.cert.display()),
        format!("--ssl-key={}", certs.key.display()),
        "--require-secure-transport=ON".to_owned(),
    ]);
    let url = |database: &str, mode: &str, ca: Option<&Path>| {
        let ca = ca.map_or(String::new(), |c| format!("&ssl-ca={}", c.display()));
        format!("{}?ssl-mode={mode}{ca}", server.url(database))
    };
    server.wait_ready_at(&url("mysql", "REQUIRED", None)).await;
    PrivateServer::create_database(&url("mysql", "REQUIRED", None), "app").await;

    // The server refuses the same user without TLS (MariaDB answers "access denied", MySQL
    // "insecure transport").
    match Client::connect(&url("app", "DISABLED", None)).await {
        Ok(_) => panic!("a plain connection was accepted by a TLS-only server"),
        Err(e) => {
            let text = e.to_string().to_lowercase();
            assert!(
                text.contains("access denied") || text.contains("insecure transport"),
                "{e}"
            );
        }
    }

    // Queues and topics over TLS, the server's authority checked.
    let client = Client::connect(&url("app", "VERIFY_CA", Some(&certs.ca)))
        .await
        .unwrap();
    client.migrate().await.unwrap();
    let cipher: String = sqlx::query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .fetch_one(client.pool())
        .await
        .unwrap()
        .get(1);
    assert!(!cipher.is_empty(), "the session is not encrypted");
    let q = client
        .create_queue("tls", QueueConfig::default())
        .await
        .unwrap();
    let sent = q.send(Message::new("over tls")).await.unwrap();
    let got = q.receive(1, Duration::from_secs(30)).await.unwrap();
    assert_eq!(got[0].id, sent.id);
    q.ack(got[0].receipt()).await.unwrap();
    let t = client
        .create_topic("tls", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    let g = t
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    t.publish_batch((0..10).map(|i| Record::new(format!("{i}"))).collect())
        .await
        .unwrap();
    let mut seen = 0;
    for _ in 0..50 {
        let batch = g.receive(100, Duration::from_secs(30)).await.unwrap();
        seen += batch.len();
        let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
        g.ack_batch(&receipts).await.unwrap();
        if seen == 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen, 10);

    // A certificate from another authority, or made out to another host name, is refused.
    let other = Client::connect(&url("app", "VERIFY_CA", Some(&certs.other_ca))).await;
    assert!(
        other.is_err(),
        "a certificate of another authority was accepted"
    );
    let identity = Client::connect(&url("app", "VERIFY_IDENTITY", Some(&certs.ca))).await;
    match identity {
        Ok(_) => panic!("a certificate for {CERT_HOST} was accepted for 127.0.0.1"),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// The files of the MySQL and MariaDB manuals' openssl recipe, plus another authority.
struct ManualCerts {
    ca: PathBuf,
    other_ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    /// The client's key as the recipe leaves it (PKCS#8 with OpenSSL 3).
    client_key: PathBuf,
    /// The same key in PKCS#1 (`BEGIN RSA PRIVATE KEY`), as MySQL's own generated
    /// `client-key.pem` and OpenSSL 1.1's `openssl rsa` write it.
    client_key_pkcs1: PathBuf,
}

/// The certificate's X.509 version (1 or 3), as `openssl x509 -text` prints it.
fn x509_version(cert: &Path) -> u32 {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(cert)
        .output()
        .expect("openssl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Version: "))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no version in:\n{text}"))
}

/// The manuals' recipe ("Creating SSL and RSA Certificates and Keys using openssl", MySQL;
/// "Certificate Creation with OpenSSL", MariaDB): a CA made by `openssl req -new -x509`, and
/// server and client certificates signed by `openssl x509 -req` without `-extfile`: X.509 v1
/// certificates, without subjectAltName or basicConstraints. The server's is made out to
/// `CN=localhost`.
fn manual_certs(dir: &Path) -> ManualCerts {
    openssl(dir, &["genrsa", "-out", "ca-key.pem", "2048"]);
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-x509",
            "-nodes",
            "-days",
            "2",
            "-key",
            "ca-key.pem",
            "-subj",
            "/CN=manual CA",
            "-out",
            "ca-cert.pem",
        ],
    );
    let signed = |name: &str, cn: &str| {
        let key = format!("{name}-key.pem");
        let req = format!("{name}-req.pem");
        let cert = format!("{name}-cert.pem");
        openssl(
            dir,
            &[
                "req", "-newkey", "rsa:2048", "-days", "2", "-nodes", "-subj", cn, "-keyout", &key,
                "-out", &req,
            ],
        );
        openssl(dir, &["rsa", "-in", &key, "-out", &key]);
        let sign = |extra: &[&str]| {
            let mut args = vec![
                "x509",
                "-req",
                "-in",
                &req,
                "-days",
                "2",
                "-CA",
                "ca-cert.pem",
                "-CAkey",
                "ca-key.pem",
                "-set_serial",
                "01",
                "-out",
                &cert,
            ];
            args.extend_from_slice(extra);
            openssl(dir, &args);
        };
        sign(&[]);
        if x509_version(&dir.join(&cert)) != 1 {
            // OpenSSL 3.2 and later add key identifiers (hence v3) by default: ask for none,
            // which leaves the v1 certificate of older releases (and of the manuals).
            std::fs::write(
                dir.join("v1.ext"),
                "subjectKeyIdentifier = none\nauthorityKeyIdentifier = none\n",
            )
            .unwrap();
            sign(&["-extfile", "v1.ext"]);
        }
        assert_eq!(
            x509_version(&dir.join(&cert)),
            1,
            "{cert} is not an X.509 v1 certificate"
        );
    };
    signed("server", "/CN=localhost");
    signed("client", "/CN=sqlmq test client");
    openssl(
        dir,
        &[
            "rsa",
            "-in",
            "client-key.pem",
            "-traditional",
            "-out",
            "client-key-pkcs1.pem",
        ],
    );
    assert!(
        std::fs::read_to_string(dir.join("client-key-pkcs1.pem"))
            .unwrap()
            .starts_with("-----BEGIN RSA PRIVATE KEY-----")
    );
    make_ca(dir, "other-ca", "/CN=another CA");
    ManualCerts {
        ca: dir.join("ca-cert.pem"),
        other_ca: dir.join("other-ca.pem"),
        server_cert: dir.join("server-cert.pem"),
        server_key: dir.join("server-key.pem"),
        client_cert: dir.join("client-cert.pem"),
        client_key: dir.join("client-key.pem"),
        client_key_pkcs1: dir.join("client-key-pkcs1.pem"),
    }
}

/// A private server that takes TLS connections only, with the manuals' certificates and a
/// row-format binary log (for notifications), and database `app` migrated (as root, through
/// the Unix socket, which needs no TLS).
async fn manual_tls_server() -> (PrivateServer, ManualCerts) {
    let mut server = PrivateServer::install();
    let certs = manual_certs(server.dir());
    server.start_with(&[
        format!("--ssl-ca={}", certs.ca.display()),
        format!("--ssl-cert={}", certs.server_cert.display()),
        format!("--ssl-key={}", certs.server_key.display()),
        "--require-secure-transport=ON".to_owned(),
        "--log-bin=binlog".to_owned(),
        "--binlog-format=ROW".to_owned(),
        "--server-id=1".to_owned(),
    ]);
    let socket = socket_url(&server, "mysql");
    server.wait_ready_at(&socket).await;
    PrivateServer::create_database(&socket, "app").await;
    let root = Client::connect(&socket_url(&server, "app")).await.unwrap();
    root.migrate().await.unwrap();
    (server, certs)
}

/// `database` as root through the server's Unix socket, without TLS (a socket needs none).
fn socket_url(server: &PrivateServer, database: &str) -> String {
    format!(
        "mysql://root@localhost/{database}?ssl-mode=DISABLED&socket={}",
        server.dir().join("sock").display()
    )
}

/// `mysql://user@host:port/app?query` on `server`.
fn tcp_url(server: &PrivateServer, user: &str, host: &str, query: &str) -> String {
    format!("mysql://{user}@{host}:{}/app?{query}", server.port())
}

/// A message sent, received and acked on queue `name`, over a session that is encrypted, and
/// notifications live: the binary-log follower's own connection is made with the same TLS
/// parameters (the server refuses a plain one).
async fn round_trip(client: &Client, name: &str) {
    client.start_notifications();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !client.notifications().is_live() {
        assert!(
            std::time::Instant::now() < deadline,
            "{name}: notifications {}",
            client.notifications()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cipher: String = sqlx::query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .fetch_one(client.pool())
        .await
        .unwrap()
        .get(1);
    assert!(!cipher.is_empty(), "the session is not encrypted");
    let q = client
        .create_queue(name, QueueConfig::default())
        .await
        .unwrap();
    let sent = q.send(Message::new(name.to_owned())).await.unwrap();
    let got = q.receive(1, Duration::from_secs(30)).await.unwrap();
    assert_eq!(got[0].id, sent.id);
    q.ack(got[0].receipt()).await.unwrap();
}

/// The connection to `url` is refused; the error is returned for the log.
async fn refused(url: &str, why: &str) -> String {
    match Client::connect(url).await {
        Ok(_) => panic!("{why}: {url} was accepted"),
        Err(e) => {
            eprintln!("refused as expected ({why}): {e}");
            e.to_string()
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_server_certificate_from_the_manuals_recipe_works_with_every_ssl_mode() {
    let (server, certs) = manual_tls_server().await;
    let ca = format!("ssl-ca={}", certs.ca.display());
    let other_ca = format!("ssl-ca={}", certs.other_ca.display());

    // No ssl-mode: PREFERRED, sqlx's default, encrypts when the server offers TLS.
    let preferred = Client::connect(&tcp_url(&server, "root", "127.0.0.1", ""))
        .await
        .unwrap();
    round_trip(&preferred, "preferred").await;

    // REQUIRED: encrypted, the certificate not verified (any server certificate will do).
    let required = Client::connect(&tcp_url(&server, "root", "127.0.0.1", "ssl-mode=REQUIRED"))
        .await
        .unwrap();
    round_trip(&required, "required").await;

    // VERIFY_CA: the v1 certificate chains to the authority given by ssl-ca.
    let query = format!("ssl-mode=VERIFY_CA&{ca}");
    let verify_ca = Client::connect(&tcp_url(&server, "root", "127.0.0.1", &query))
        .await
        .unwrap();
    round_trip(&verify_ca, "verify_ca").await;

    // ... and to no other: another authority, or none but the system's.
    let query = format!("ssl-mode=VERIFY_CA&{other_ca}");
    refused(
        &tcp_url(&server, "root", "127.0.0.1", &query),
        "VERIFY_CA, another CA",
    )
    .await;
    refused(
        &tcp_url(&server, "root", "127.0.0.1", "ssl-mode=VERIFY_CA"),
        "VERIFY_CA, the system's CAs",
    )
    .await;

    // VERIFY_IDENTITY: a v1 certificate names its host in the CN only (`localhost`), which
    // is what is checked: 127.0.0.1 is refused, localhost accepted.
    let query = format!("ssl-mode=VERIFY_IDENTITY&{ca}");
    refused(
        &tcp_url(&server, "root", "127.0.0.1", &query),
        "VERIFY_IDENTITY, CN=localhost dialled as 127.0.0.1",
    )
    .await;
    let identity = Client::connect(&tcp_url(&server, "root", "localhost", &query))
        .await
        .unwrap();
    round_trip(&identity, "verify_identity").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_required_to_present_a_certificate_connects_with_ssl_cert_and_ssl_key() {
    let (server, certs) = manual_tls_server().await;
    let mut root = sqlx::MySqlConnection::connect(&socket_url(&server, "mysql"))
        .await
        .unwrap();
    for sql in [
        "CREATE USER 'x509'@'%' REQUIRE X509",
        "GRANT ALL ON app.* TO 'x509'@'%'",
        // For notifications (`sqlmq grants --notifications`).
        "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'x509'@'%'",
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut root)
            .await
            .unwrap();
    }
    let ca = format!("ssl-ca={}", certs.ca.display());

    // Encrypted, but no client certificate: the server refuses the user.
    let e = refused(
        &tcp_url(
            &server,
            "x509",
            "127.0.0.1",
            &format!("ssl-mode=VERIFY_CA&{ca}"),
        ),
        "REQUIRE X509 without a client certificate",
    )
    .await;
    assert!(e.to_lowercase().contains("access denied"), "{e}");

    // With the client's certificate and key (as the recipe leaves the key, and in PKCS#1).
    for (key, queue) in [
        (&certs.client_key, "x509"),
        (&certs.client_key_pkcs1, "x509_pkcs1"),
    ] {
        let query = format!(
            "ssl-mode=VERIFY_CA&{ca}&ssl-cert={}&ssl-key={}",
            certs.client_cert.display(),
            key.display()
        );
        let client = Client::connect(&tcp_url(&server, "x509", "127.0.0.1", &query))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", key.display()));
        let user: String = sqlx::query_scalar("SELECT CURRENT_USER()")
            .fetch_one(client.pool())
            .await
            .unwrap();
        assert_eq!(user, "x509@%");
        round_trip(&client, queue).await;
    }
}
