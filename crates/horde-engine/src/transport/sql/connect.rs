//! Opening a connection: the URL's hosts tried in turn (libpq's rules as tokio-postgres's `Config`
//! parses them: `host`, `hostaddr`, `port`, a directory for a Unix socket, `connect_timeout`,
//! `target_session_attrs`, `load_balance_hosts`), the startup message, and the login: trust,
//! cleartext password, MD5 or SCRAM-SHA-256. No TLS: `sslmode=prefer` (the default) and
//! `disable` connect in the clear, `require` is refused, as tokio-postgres without a TLS
//! connector did. The password stays in the `Config`: never copied into a message or a log.

use super::cancel::{Address, CancelKey};
use super::connection::SqlConnection;
use super::wire::{self, SqlError, Stream, Wire};
use bytes::BytesMut;
use postgres_protocol::authentication::sasl;
use postgres_protocol::message::frontend;
use std::net::SocketAddr;
use std::time::Duration;
use tokio_postgres::config::{ChannelBinding, Host, LoadBalanceHosts, SslMode, TargetSessionAttrs};
use tokio_postgres::Config;

/// Opens a connection to the first of the URL's hosts that takes the login. Boxed: a VU, a lease
/// and the pool hand a connection on at every step, and a step's future holds it while it runs
/// (a few hundred bytes moved each time, and room for it in every step's future, where a box is
/// a pointer).
pub(crate) async fn connect(config: &Config) -> Result<Box<SqlConnection>, SqlError> {
    first_host(config).await.map(Box::new)
}

/// The first of the URL's hosts that accepts a login (and, with `target_session_attrs`, is of
/// the kind asked for); else the last one's error.
async fn first_host(config: &Config) -> Result<SqlConnection, SqlError> {
    if config.get_ssl_mode() == SslMode::Require {
        return Err(SqlError::Client(
            "sslmode=require: the postgres transport speaks no TLS (use sslmode=disable or prefer)".into(),
        ));
    }
    let hosts = config.get_hosts();
    let hostaddrs = config.get_hostaddrs();
    let count = hosts.len().max(hostaddrs.len());
    if count == 0 {
        return Err(SqlError::Client("the URL names no host".into()));
    }
    let mut order: Vec<usize> = (0..count).collect();
    if config.get_load_balance_hosts() == LoadBalanceHosts::Random {
        // Any shuffle will do: the start time's nanoseconds seed a Fisher-Yates pass.
        let mut seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |since| since.subsec_nanos() as u64 | 1);
        for at in (1..order.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            order.swap(at, (seed % (at as u64 + 1)) as usize);
        }
    }
    let ports = config.get_ports();
    let mut last_error = None;
    for index in order {
        let port = ports.get(index).or_else(|| ports.first()).copied().unwrap_or(5432);
        let attempt = async {
            let (stream, address) = open(config, hostaddrs.get(index), hosts.get(index), port).await?;
            let mut connection = SqlConnection::new(Wire::new(stream));
            let backend = login(&mut connection.wire, config).await?;
            connection.cancel = backend.map(|(process_id, secret_key)| CancelKey {
                address,
                process_id,
                secret_key,
                limit: config.get_connect_timeout().copied().unwrap_or_default(),
            });
            check_session(&mut connection, config.get_target_session_attrs()).await?;
            Ok(connection)
        };
        match attempt.await {
            Ok(connection) => return Ok(connection),
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or(SqlError::Closed))
}

/// The socket to one host: `hostaddr` when given (no name lookup), else the host's name, or its
/// Unix socket when the host is a directory; and where it went (a cancel request goes there).
async fn open(
    config: &Config,
    hostaddr: Option<&std::net::IpAddr>,
    host: Option<&Host>,
    port: u16,
) -> Result<(Stream, Address), SqlError> {
    let timeout = config.get_connect_timeout().copied();
    let addresses: Vec<SocketAddr> = match (hostaddr, host) {
        (Some(address), _) => vec![SocketAddr::new(*address, port)],
        (None, Some(Host::Tcp(name))) => {
            within(timeout, tokio::net::lookup_host((name.as_str(), port))).await.map_err(SqlError::Connect)?.collect()
        }
        (None, Some(Host::Unix(directory))) => {
            let path = directory.join(format!(".s.PGSQL.{port}"));
            let stream = within(timeout, tokio::net::UnixStream::connect(&path)).await.map_err(SqlError::Connect)?;
            return Ok((Stream::Unix(stream), Address::Unix(path)));
        }
        (None, None) => return Err(SqlError::Client("the URL names no host".into())),
    };
    let mut last_error = std::io::Error::new(std::io::ErrorKind::NotFound, "the host's name resolved to no address");
    for address in addresses {
        match within(timeout, tcp(address)).await {
            Ok(stream) => return Ok((Stream::Tcp(stream), Address::Tcp(address))),
            Err(error) => last_error = error,
        }
    }
    Err(SqlError::Connect(last_error))
}

/// A TCP connection with Nagle off (each message batch is one write, sent at once) and
/// keepalives on, as tokio-postgres set them.
async fn tcp(address: SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
    let socket = if address.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_keepalive(true)?;
    let stream = socket.connect(address).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

async fn within<T>(
    timeout: Option<Duration>,
    future: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    match timeout {
        Some(limit) => tokio::time::timeout(limit, future).await.unwrap_or_else(|_| {
            Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out (target.connect_timeout_ms)"))
        }),
        None => future.await,
    }
}

/// Startup, the login the server asks for, then its parameters up to ReadyForQuery; the
/// backend's process id and secret key (BackendKeyData), which cancel its statements.
async fn login(wire: &mut Wire, config: &Config) -> Result<Option<(i32, i32)>, SqlError> {
    let user = match config.get_user() {
        Some(user) => user.to_owned(),
        // libpq's default: the operating system's user name.
        None => {
            std::env::var("USER").map_err(|_| SqlError::Client("the URL names no user and $USER is not set".into()))?
        }
    };
    let mut params = vec![("client_encoding", "UTF8"), ("user", user.as_str())];
    if let Some(database) = config.get_dbname() {
        params.push(("database", database));
    }
    if let Some(options) = config.get_options() {
        params.push(("options", options));
    }
    if let Some(application_name) = config.get_application_name() {
        params.push(("application_name", application_name));
    }
    frontend::startup_message(params, &mut wire.out).map_err(encode)?;
    wire.send().await?;
    let mut scram: Option<sasl::ScramSha256> = None;
    let mut backend = None;
    loop {
        let frame = wire.frame().await?;
        let body = wire.body(frame);
        match frame.tag {
            b'R' => {
                let (code, data) = wire::authentication(body)?;
                let mut reply = BytesMut::new();
                match code {
                    0 => {
                        if config.get_channel_binding() == ChannelBinding::Require {
                            return Err(SqlError::Client(
                                "channel_binding=require: the server did not use channel binding".into(),
                            ));
                        }
                    }
                    3 => frontend::password_message(password(config)?, &mut reply).map_err(encode)?,
                    5 => {
                        let salt: [u8; 4] = data
                            .get(..4)
                            .and_then(|salt| salt.try_into().ok())
                            .ok_or_else(|| SqlError::Client("a short MD5 salt".into()))?;
                        let hashed =
                            postgres_protocol::authentication::md5_hash(user.as_bytes(), password(config)?, salt);
                        frontend::password_message(hashed.as_bytes(), &mut reply).map_err(encode)?;
                    }
                    10 => {
                        if !wire::sasl_mechanisms(data).contains(&sasl::SCRAM_SHA_256) {
                            return Err(SqlError::Client(
                                "the server offered no SASL mechanism this client speaks (SCRAM-SHA-256 without TLS)"
                                    .into(),
                            ));
                        }
                        if config.get_channel_binding() == ChannelBinding::Require {
                            return Err(SqlError::Client(
                                "channel_binding=require needs TLS, which the postgres transport does not speak".into(),
                            ));
                        }
                        let client = sasl::ScramSha256::new(password(config)?, sasl::ChannelBinding::unsupported());
                        frontend::sasl_initial_response(sasl::SCRAM_SHA_256, client.message(), &mut reply)
                            .map_err(encode)?;
                        scram = Some(client);
                    }
                    11 | 12 => {
                        let client = scram
                            .as_mut()
                            .ok_or_else(|| SqlError::Client("a SASL message before the SASL exchange began".into()))?;
                        let step = if code == 11 { client.update(data) } else { client.finish(data) };
                        step.map_err(|error| SqlError::Client(format!("SCRAM-SHA-256: {error}")))?;
                        if code == 11 {
                            frontend::sasl_response(client.message(), &mut reply).map_err(encode)?;
                        }
                    }
                    other => {
                        return Err(SqlError::Client(format!(
                        "the server asked for a login method this client does not speak (authentication code {other})"
                    )))
                    }
                }
                wire.consume(frame);
                if !reply.is_empty() {
                    wire.out.extend_from_slice(&reply);
                    wire.send().await?;
                }
            }
            b'E' => {
                let (error, _) = wire::error_response(body);
                wire.broken = true;
                // A wrong password, no pg_hba.conf entry, no such database: no session, a
                // failed connect (`sql_login_failed`), not an error of the load's statements.
                return Err(error.at_login());
            }
            b'Z' => {
                wire.consume(frame);
                return Ok(backend);
            }
            b'K' => {
                // Protocol 3.0's key is 4 bytes (a longer one, 3.2's, cannot be sent by 3.0's
                // CancelRequest: none is kept).
                if let [a, b, c, d, e, f, g, h] = *body {
                    backend = Some((i32::from_be_bytes([a, b, c, d]), i32::from_be_bytes([e, f, g, h])));
                }
                wire.consume(frame);
            }
            // ParameterStatus, NoticeResponse.
            _ => wire.consume(frame),
        }
    }
}

fn password(config: &Config) -> Result<&[u8], SqlError> {
    config.get_password().ok_or_else(|| SqlError::Login {
        code: None,
        message: "the server asks for a password: give it in target.password_env or target.password_file".into(),
    })
}

fn encode(error: std::io::Error) -> SqlError {
    SqlError::Client(format!("a frontend message could not be encoded: {error}"))
}

/// `target_session_attrs=read-write` (or `read-only`): this server must be of that kind.
async fn check_session(connection: &mut SqlConnection, wanted: TargetSessionAttrs) -> Result<(), SqlError> {
    let want_read_only = match wanted {
        TargetSessionAttrs::ReadWrite => false,
        TargetSessionAttrs::ReadOnly => true,
        _ => return Ok(()),
    };
    let read_only = connection.show("transaction_read_only").await? == "on";
    if read_only != want_read_only {
        return Err(SqlError::Client(format!(
            "the server's session is {}",
            if read_only { "read-only" } else { "read-write" }
        )));
    }
    Ok(())
}
