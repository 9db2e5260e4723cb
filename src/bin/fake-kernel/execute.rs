//! The fake kernel's `execute_request`: the command language of the module docs in `main.rs`,
//! one command per line, and the floods and failures it produces.

use super::*;

/// What ended an execution early.
struct Failure {
    ename: String,
    evalue: String,
}

fn fail(ename: &str, evalue: impl Into<String>) -> Failure {
    Failure {
        ename: ename.into(),
        evalue: evalue.into(),
    }
}

impl Kernel {
    pub(super) async fn execute(&self, req: Message, input: &mut mpsc::UnboundedReceiver<Message>) {
        let code = req.content["code"].as_str().unwrap_or("").to_owned();
        let silent = req.content["silent"].as_bool().unwrap_or(false);
        let allow_stdin = req.content["allow_stdin"].as_bool().unwrap_or(false);
        let lines: Vec<&str> = code
            .lines()
            .map(str::trim_start)
            .filter(|l| !l.trim_end().is_empty())
            .collect();
        let has = |cmd: &str| lines.iter().any(|l| l.trim_end() == cmd);
        if has("abort") {
            let n = self.execution_count.load(Ordering::SeqCst);
            self.reply(
                Route::Shell,
                &req,
                "execute_reply",
                json!({"status": "abort", "execution_count": n}),
            )
            .await;
            return;
        }
        if self.cfg.null_parents {
            self.publish_raw(
                None,
                "stream",
                json!({"name": "stdout", "text": "unparented noise\n"}),
                None,
            )
            .await;
        }
        self.status(&req, "busy").await;
        let n = if silent {
            self.execution_count.load(Ordering::SeqCst)
        } else {
            self.execution_count.fetch_add(1, Ordering::SeqCst) + 1
        };
        if !silent {
            self.publish(
                &req,
                "execute_input",
                json!({"code": code, "execution_count": n}),
            )
            .await;
        }
        let reply_first = has("reply-first");
        let ok_reply =
            json!({"status": "ok", "execution_count": n, "user_expressions": {}, "payload": []});
        if reply_first {
            self.reply(Route::Shell, &req, "execute_reply", ok_reply.clone())
                .await;
        }
        let mut late = Vec::new();
        let mut outcome = Ok(());
        for line in &lines {
            outcome = self
                .command(&req, line, n, allow_stdin, input, &mut late)
                .await;
            if outcome.is_err() {
                break;
            }
        }
        let reply = match outcome {
            Ok(()) => ok_reply,
            Err(f) => {
                let traceback = vec![format!("\x1b[31m{}\x1b[0m: {}", f.ename, f.evalue)];
                self.publish(
                    &req,
                    "error",
                    json!({"ename": f.ename, "evalue": f.evalue, "traceback": traceback}),
                )
                .await;
                json!({"status": "error", "execution_count": n, "ename": f.ename,
                       "evalue": f.evalue, "traceback": traceback, "user_expressions": {}, "payload": []})
            }
        };
        if !reply_first && !has("drop-reply") {
            self.reply(Route::Shell, &req, "execute_reply", reply).await;
        }
        self.status(&req, "idle").await;
        for (ms, text) in late {
            let k = self.clone();
            let req = req.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                k.stream(&req, "stdout", &format!("{text}\n")).await;
            });
        }
    }

    /// Run one command line of an execute request.
    async fn command(
        &self,
        req: &Message,
        line: &str,
        n: i64,
        allow_stdin: bool,
        input: &mut mpsc::UnboundedReceiver<Message>,
        late: &mut Vec<(u64, String)>,
    ) -> Result<(), Failure> {
        // Text arguments keep trailing spaces (an `input` prompt); numbers are trimmed.
        let (cmd, rest) = line.split_once(' ').unwrap_or((line.trim_end(), ""));
        let num = rest.trim();
        let mut interrupts = self.interrupts.subscribe();
        match cmd {
            "print" => self.stream(req, "stdout", &format!("{rest}\n")).await,
            "eprint" => self.stream(req, "stderr", &format!("{rest}\n")).await,
            "result" => {
                self.publish(
                    req,
                    "execute_result",
                    json!({"execution_count": n, "data": {"text/plain": rest}, "metadata": {}}),
                )
                .await
            }
            "display" => {
                self.publish(
                    req,
                    "display_data",
                    json!({"data": {"text/plain": rest}, "metadata": {}, "transient": {}}),
                )
                .await
            }
            "error" => {
                let (ename, evalue) = num.split_once(' ').unwrap_or((num, ""));
                return Err(fail(ename, evalue));
            }
            "sleep" => {
                let secs = num
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e9)
                    .ok_or_else(|| fail("ValueError", format!("bad seconds {rest:?}")))?;
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs_f64(secs)) => {}
                    _ = interrupts.changed() => return Err(fail("KeyboardInterrupt", "")),
                }
            }
            "exit" => {
                let code = num.parse::<i32>().unwrap_or(1);
                log!("exit {code}: exiting without a reply");
                std::process::exit(code);
            }
            "input" => {
                self.input(req, rest, allow_stdin, input, &mut interrupts)
                    .await?
            }
            "late" => {
                let (ms, text) = rest.split_once(' ').unwrap_or((num, ""));
                let ms = ms
                    .parse::<u64>()
                    .map_err(|_| fail("ValueError", format!("bad milliseconds {ms:?}")))?;
                late.push((ms, text.to_owned()));
            }
            "flood" => {
                let total = num
                    .parse::<usize>()
                    .map_err(|_| fail("ValueError", format!("bad byte count {num:?}")))?;
                self.flood(req, total).await;
            }
            "abort" | "reply-first" | "drop-reply" => {}
            other => self.misbehave(req, other, num).await?,
        }
        Ok(())
    }

    /// `input <prompt>`: an `input_request` on stdin, then `got <value>` on stdout.
    async fn input(
        &self,
        req: &Message,
        prompt: &str,
        allow_stdin: bool,
        input: &mut mpsc::UnboundedReceiver<Message>,
        interrupts: &mut watch::Receiver<u64>,
    ) -> Result<(), Failure> {
        if !allow_stdin && !self.cfg.input_without_allow {
            return Err(fail(
                "StdinNotImplementedError",
                "raw_input was called, but this frontend does not support input requests.",
            ));
        }
        while input.try_recv().is_ok() {} // stale replies
        self.reply(
            Route::Stdin,
            req,
            "input_request",
            json!({"prompt": prompt, "password": false}),
        )
        .await;
        let value = tokio::select! {
            r = input.recv() => match r {
                Some(m) => m.content["value"].as_str().unwrap_or("").to_owned(),
                None => return Err(fail("EOFError", "stdin closed")),
            },
            _ = interrupts.changed() => return Err(fail("KeyboardInterrupt", "")),
        };
        self.stream(req, "stdout", &format!("got {value}\n")).await;
        Ok(())
    }

    /// The commands that break the protocol on purpose (`invalid-utf8`, `garbage`,
    /// `close-sockets`, `hang`); any other is a NameError.
    async fn misbehave(&self, req: &Message, cmd: &str, num: &str) -> Result<(), Failure> {
        match cmd {
            "invalid-utf8" => {
                let mut content = br#"{"name":"stdout","text":"bad "#.to_vec();
                content.extend_from_slice(b"\xff\xfe");
                content.extend_from_slice(br#" bytes\n"}"#);
                let placeholder = json!({"name": "stdout", "text": ""});
                self.publish_raw(Some(req), "stream", placeholder, Some(&content))
                    .await;
            }
            "garbage" => {
                // Three frames that are no message, then a message signed with another key.
                let noise = vec![
                    Bytes::from_static(b"kernel.fake.noise"),
                    Bytes::from_static(b"not a delimiter"),
                    Bytes::from_static(b"\xff\x00"),
                ];
                let mut forged = Message::reply_to(
                    &req.header,
                    "stream",
                    json!({"name": "stdout", "text": "FORGED\n"}),
                    &self.session,
                );
                forged.identities = vec![Bytes::from_static(b"kernel.fake.stream")];
                let forged = wire::encode(&forged, &Signer::new(b"another key"));
                let mut iopub = self.iopub.lock().await;
                for frames in [noise, forged] {
                    if let Ok(z) = ZmqMessage::try_from(frames) {
                        let _ = iopub.send(z).await;
                    }
                }
            }
            "close-sockets" => {
                // `later`: after this request's reply and idle; else at once, mid-run.
                if num == "later" {
                    tokio::spawn(async {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        close_sockets_and_linger();
                    });
                } else {
                    // Let what was published so far leave the PUB socket first.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    close_sockets_and_linger();
                }
            }
            "hang" => {
                self.hanging.store(true, Ordering::SeqCst);
                log!("hang: ignoring interrupts from now on");
                std::future::pending::<()>().await;
            }
            other => return Err(fail("NameError", format!("unknown command {other:?}"))),
        }
        Ok(())
    }

    /// `total` bytes of stdout as numbered 64-byte lines, in [`CHUNK`]-byte messages.
    async fn flood(&self, req: &Message, total: usize) {
        let mut text = String::with_capacity(CHUNK);
        let mut line_no = 0usize;
        let mut sent = 0usize;
        while sent < total {
            text.clear();
            while text.len() < CHUNK && sent + text.len() < total {
                let room = (CHUNK - text.len()).min(total - sent - text.len());
                let line = format!("{line_no:>10} {}\n", "x".repeat(52));
                line_no += 1;
                text.push_str(&line[..room.min(line.len())]);
            }
            sent += text.len();
            self.stream(req, "stdout", &text).await;
        }
    }
}

/// Replace this process with one that holds none of the kernel's sockets (they are
/// close-on-exec) yet keeps the pid alive: `sh`, ignoring SIGINT, then `sleep`. Only SIGTERM
/// or SIGKILL end it. Returns only if the exec fails.
fn close_sockets_and_linger() {
    use std::os::unix::process::CommandExt;
    log!("close-sockets: every socket closes now; the process lingers");
    let e = std::process::Command::new("/bin/sh")
        .args(["-c", "trap '' INT; exec sleep 3600"])
        .exec();
    log!("close-sockets: exec failed: {e}");
}
