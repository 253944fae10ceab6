//! What the routers learn of the dynos, besides which are up ([`super::lifecycle`]).
//!
//! Their loads (`router.view`): the routers' counts change when a router sends a request or
//! stops counting one, and the board they read under a late view
//! ([`crate::view::Board`]) is told of each change; the board's own event refreshes it, or
//! shows the changes that are now old enough, and then the routers may send what they hold.
//!
//! Under `exact` there is no board: the counting costs one test of an empty option.
//!
//! Under `jiq`, the idle dynos' reports to the routers ([`super::idle`] keeps them): a dyno
//! that may have become idle reports, and the reports on their way reach their routers.

use super::events::{Event, CONNECTED, VIEW};
use super::Simulation;
use crate::view::Update;

impl<const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'_, FEEDBACK, EXTRAS, PLAIN>
{
    /// `router` sends a request to `dyno`: it counts against the dyno from now on.
    #[inline]
    pub(super) fn count_sent(&mut self, router: usize, dyno: usize) {
        self.routers.loads[router].increment(dyno);
        if let Some(board) = self.routers.board.as_deref_mut().filter(|_| Self::VIEWS) {
            if let Some(at) = board.sent(dyno, self.now) {
                self.events.schedule(at, VIEW, Event::View);
            }
        }
    }

    /// `router` stops counting a request at `dyno`: answered, refused, killed or let go.
    #[inline]
    pub(super) fn count_done(&mut self, router: usize, dyno: usize) {
        self.routers.loads[router].decrement(dyno);
        if let Some(board) = self.routers.board.as_deref_mut().filter(|_| Self::VIEWS) {
            if let Some(at) = board.done(dyno, self.now) {
                self.events.schedule(at, VIEW, Event::View);
            }
        }
    }

    /// Schedules the board's first refresh, if it has a board that refreshes.
    pub(super) fn schedule_first_view(&mut self) {
        if let Some(at) = self
            .routers
            .board
            .as_deref_mut()
            .and_then(|b| b.first_event())
        {
            self.events.schedule(at, VIEW, Event::View);
        }
    }

    /// The board's event at `time`: it is refreshed or shows the changes due, and the routers
    /// offer what they hold again (a policy that holds, such as intelligent, finds free slots
    /// on the board only now). Refreshes go on while anything else is pending: with nothing
    /// left, the run is over. One that sends nothing is no part of the run's work, and leaves
    /// the run's end where it was (as a deadline that finds its request answered does).
    pub(super) fn view_due(&mut self, time: f64) {
        let before = self.now;
        self.now = time;
        let board = self
            .routers
            .board
            .as_deref_mut()
            .expect("a late view's board");
        let delayed = board.update() == Update::Delayed;
        let next = board.due(time);
        let held = self.routers.held();
        if held > 0 {
            for router in 0..self.routers.queues.len() {
                self.drain_router(router);
            }
        }
        if self.routers.held() == held {
            self.now = before;
        }
        if let Some(at) = next {
            // A delayed board's event is pending while changes wait to be shown (its next
            // change asks for one otherwise); refreshes, while the run goes on.
            if delayed || !self.events.is_idle() {
                self.events.schedule(at, VIEW, Event::View);
            }
        }
    }

    /// `dyno` may have become idle: if it is up with nothing at it, it reports (see
    /// [`super::idle`]).
    #[inline]
    pub(super) fn idle_check(&mut self, dyno: usize) {
        if !self.routers.takes_idle_reports() {
            return;
        }
        let d = &self.dynos[dyno];
        if d.busy > 0 || d.waiting > 0 || !self.routers.is_up(dyno) {
            return;
        }
        if let Some(at) = self.routers.report_idle(dyno, self.now) {
            self.events.schedule(at, CONNECTED, Event::Report);
        }
    }

    /// Idle reports reach their routers.
    pub(super) fn reports_due(&mut self) {
        if let Some(at) = self.routers.deliver_reports(self.now) {
            self.events.schedule(at, CONNECTED, Event::Report);
        }
    }
}
