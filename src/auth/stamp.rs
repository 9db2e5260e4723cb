//! Identity on connection transports: [`Stamped`] wraps an rmcp transport (stdio, a socket
//! connection) and puts the connection's [`Authenticated`] into every message it receives,
//! so a handler reads who is calling the same way on every face ([`super::authenticated`]).
//! Over HTTP the face's gate puts it in the request's extensions instead, which rmcp hands
//! on inside `http::request::Parts`.

use std::borrow::Cow;

use rmcp::RoleServer;
use rmcp::model::{GetExtensions, JsonRpcMessage};
use rmcp::transport::{IntoTransport, Transport};

use crate::principal::Authenticated;

/// A transport whose received requests and notifications carry `who`.
pub struct Stamped<T> {
    inner: T,
    who: Authenticated,
}

/// `transport`, stamping what it receives with `who`.
pub fn stamped<T, E, A>(
    transport: T,
    who: Authenticated,
) -> Stamped<impl Transport<RoleServer, Error = E> + 'static>
where
    T: IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    Stamped {
        inner: transport.into_transport(),
        who,
    }
}

impl<T> Transport<RoleServer> for Stamped<T>
where
    T: Transport<RoleServer>,
{
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleServer>> {
        let mut message = self.inner.receive().await?;
        match &mut message {
            JsonRpcMessage::Request(r) => {
                r.request.extensions_mut().insert(self.who.clone());
            }
            JsonRpcMessage::Notification(n) => {
                n.notification.extensions_mut().insert(self.who.clone());
            }
            _ => {}
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::{Access, Principal};
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn every_request_and_notification_received_carries_the_connections_identity() {
        let (ours, mut theirs) = tokio::io::duplex(4096);
        let who = Authenticated {
            principal: Principal::LocalUser { uid: 1001 },
            access: Access::Execute,
        };
        let (read, write) = tokio::io::split(ours);
        let mut t = stamped((read, write), who.clone());
        theirs
            .write_all(
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\
                  {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
            )
            .await
            .unwrap();
        for _ in 0..2 {
            let m = t.receive().await.expect("a message");
            let stamped = match &m {
                JsonRpcMessage::Request(r) => super::super::authenticated(r.request.extensions()),
                JsonRpcMessage::Notification(n) => {
                    super::super::authenticated(n.notification.extensions())
                }
                _ => None,
            };
            assert_eq!(stamped, Some(&who));
        }
    }
}
