//! What the concurrency limits (`router.concurrency_limit`, `app.concurrency_limit`; their
//! state in [`super::limit`]) do to a request: a router's limiter admits it when a client
//! sends it (`dispatch.rs`), a dyno's when it reaches the dyno (`threads.rs`), or answers it
//! 503 at once (`limit_rejected`, counted in `limit.rejected`); and each learns how it ended.
//!
//! How a request ends for a limiter follows Netflix's gRPC server interceptor
//! (`ConcurrencyLimitServerInterceptor`): any answer is a sample of its latency (errors
//! included), a timeout or a client that went (a cancel) is a drop, and what ends with no
//! meaningful latency is ignored (`Limiter.Listener.onIgnore`). For a router: an answer from
//! its dyno is a sample, its own timeout (H12) or the client's is a drop, and a refusal, a
//! dyno's limit, a crash are ignored. For a dyno: the app's answer is a sample, the app's own
//! timeouts (`app.service_timeout`, `app.wait_timeout`) are drops, a full backlog or a death
//! with the dyno are ignored. A dyno's limiter is in front of the app (as Envoy's
//! adaptive_concurrency filter is), so a router that gave up on a request does not end it
//! there: the app works on.

use super::limit::Ended;
use super::Simulation;
use crate::result::ErrorKind;

impl<const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'_, FEEDBACK, EXTRAS, PLAIN>
{
    /// Request `req` ended at its router's limiter (`router`), as `how`.
    pub(super) fn limit_end_router(&mut self, req: u32, router: usize, how: Ended) {
        let Some(limits) = self.limits.as_deref_mut().filter(|_| FEEDBACK) else {
            return;
        };
        if let Some(limit) = limits.end_router(router, req, &self.slab, self.now, how) {
            self.measures.limit_set(false, router, self.now, limit);
        }
    }

    /// Request `req` ended at dyno `dyno`'s limiter, as `how`.
    pub(super) fn limit_end_dyno(&mut self, req: u32, dyno: usize, how: Ended) {
        let Some(limits) = self.limits.as_deref_mut().filter(|_| FEEDBACK) else {
            return;
        };
        if let Some(limit) = limits.end_dyno(dyno, req, &self.slab, self.now, how) {
            self.measures.limit_set(true, dyno, self.now, limit);
        }
    }

    /// The app answered request `req` on `dyno` (with `error`, or its response): its dyno's
    /// limiter has a sample (a drop for the app's own timeouts), and so has its router's,
    /// unless the router let it go before.
    #[inline(never)]
    pub(super) fn limits_answered(
        &mut self,
        req: u32,
        dyno: usize,
        router: usize,
        router_done: bool,
        error: Option<ErrorKind>,
    ) {
        let how = match error {
            Some(ErrorKind::ServiceTimeout | ErrorKind::WaitTimeout) => Ended::Dropped,
            _ => Ended::Answered,
        };
        self.limit_end_dyno(req, dyno, how);
        if !router_done {
            self.limit_end_router(req, router, Ended::Answered);
        }
    }

    /// Whether router `router`'s limiter (if any) admits request `req`, which a client sends
    /// now; if not, the router answers it 503 at once (out of line: a run without a limit
    /// pays only its caller's test).
    #[inline(never)]
    pub(super) fn limit_admits_at_router(&mut self, router: usize, req: u32) -> bool {
        let in_flight = self.routers.in_flight[router];
        let limits = self.limits.as_deref_mut().expect("limits");
        if limits.admit_router(router, in_flight, req, &self.slab, self.now) {
            return true;
        }
        self.slab.entries[req as usize].router_done = true;
        let origin = self.origin(req);
        self.measures.limit_rejected(origin);
        self.answer_at_once(req, ErrorKind::LimitRejected);
        false
    }

    /// Whether dyno `dyno`'s limiter (if any) admits request `req`, which reaches it now; if
    /// not, it is answered 503 at once (out of line, as above).
    #[inline(never)]
    pub(super) fn limit_admits_at_dyno(&mut self, dyno: usize, req: u32) -> bool {
        let limits = self.limits.as_deref_mut().expect("limits");
        if limits.admit_dyno(dyno, req, &self.slab, self.now) {
            return true;
        }
        self.limit_refuse_at_dyno(dyno, req);
        false
    }

    /// `app.concurrency_limit`: dyno `dyno` has as many requests in flight as its limit when
    /// `req` reaches it; its limiter answers 503 at once, which its router may retry on
    /// another dyno (`router.retry_on` "5xx"), or its client.
    fn limit_refuse_at_dyno(&mut self, dyno: usize, req: u32) {
        let origin = self.origin(req);
        self.measures.limit_rejected(origin);
        let e = &mut self.slab.entries[req as usize];
        let (router, answered, router_done) = (e.router as usize, e.answered, e.router_done);
        e.answered = true;
        e.router_done = true;
        if !answered && !self.redispatch(req, ErrorKind::LimitRejected) {
            self.client_error(req, ErrorKind::LimitRejected, 0.0);
        }
        if !router_done {
            self.count_done(router, dyno);
            self.routers.in_flight[router] -= 1;
        }
        self.slab.release(req);
        self.drain_router(router);
    }
}
