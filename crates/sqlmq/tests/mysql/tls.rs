//! TLS to the database: a private `mariadbd` with a certificate authority and a server
//! certificate generated at test time (`openssl`) and `require_secure_transport=ON`, as most
//! managed MySQL services run. Queues and topics work over it with `ssl-mode` and `ssl-ca` in the
//! URL; a plain connection is refused by the server; `VERIFY_CA` refuses another authority and
//! `VERIFY_IDENTITY` a certificate made out to another host name.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use sqlmq::{Client, GroupConfig, Message, QueueConfig, Record, StartAt, TopicConfig};
use sqlx::Row;

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

/// A CA, another CA, and a server certificate for [`CERT_HOST`] signed by the first.
fn make_certs(dir: &Path) -> Certs {
    let ca = |name: &str, cn: &str| {
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
    };
    ca("ca", "/CN=sqlmq test CA");
    ca("other-ca", "/CN=another CA");
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
