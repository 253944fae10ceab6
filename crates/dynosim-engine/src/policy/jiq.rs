use super::{IdleList, IdleReporting, Knowledge, Route, RouterView, RoutingPolicy};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use crate::units::Duration;
use std::collections::VecDeque;

/// Join-Idle-Queue (Lu, Xie, Kliot, Geller, Larus, Greenberg, Performance Evaluation 68(11),
/// 2011): each router keeps an I-queue, a FIFO list of the dynos that reported themselves idle
/// to it. A request goes to the dyno at the head of its router's list, which leaves the list;
/// with the list empty, to a dyno drawn uniformly at random. The router reads no load.
///
/// A dyno reports when it becomes idle (no request at it, from any router), to one router:
/// one drawn at random (`jiq_report_d = 1`, JIQ-Random), or the one with the shortest list of
/// `jiq_report_d` drawn (JIQ-SQ(d)); the report arrives `jiq_report_delay` later. The engine
/// sends the reports (`sim::idle`) and keeps each dyno on one list at most: a listed dyno that
/// got a random request meanwhile stays listed, and reports nothing when it is idle again
/// (Lu's rule: a hit may land on a busy dyno; and Lu's analysis, in which each idle dyno is on
/// exactly one list). A dyno going down leaves its list.
#[derive(Debug, Clone)]
pub struct Jiq {
    reporting: IdleReporting,
    idle: VecDeque<u32>,
    /// The dyno the last routing decision took from the list.
    hit: Option<u32>,
}

pub fn build(p: &Params) -> Result<Box<dyn RoutingPolicy>> {
    let delay = match p.get::<Duration>("jiq_report_delay")? {
        None => 0.0,
        Some(d) if d.0 >= 0.0 && d.0.is_finite() => d.0,
        Some(d) => {
            return Err(p.error(
                "jiq_report_delay",
                format!("must be a duration >= 0, got {} s", d.0),
            ))
        }
    };
    Ok(Box::new(Jiq {
        reporting: IdleReporting {
            // As many as `router.routers` may be: a larger d samples every router.
            d: p.whole("jiq_report_d", 1, 1, 100_000)?,
            delay,
        },
        idle: VecDeque::new(),
        hit: None,
    }))
}

impl RoutingPolicy for Jiq {
    #[inline]
    fn route(&mut self, view: &RouterView, rng: &mut SimRng) -> Route {
        self.hit = self.idle.pop_front();
        match self.hit {
            Some(dyno) => Route::To(dyno as usize),
            None => Route::To(view.random_dyno(rng)),
        }
    }
    fn knowledge(&self) -> Knowledge {
        Knowledge::IdleReports
    }
    fn dyno_down(&mut self, dyno: usize) {
        IdleList::remove(self, dyno);
    }
    fn idle_list(&mut self) -> Option<&mut dyn IdleList> {
        Some(self)
    }
}

impl IdleList for Jiq {
    fn reporting(&self) -> IdleReporting {
        self.reporting
    }
    fn len(&self) -> usize {
        self.idle.len()
    }
    fn push(&mut self, dyno: usize) {
        self.idle.push_back(dyno as u32);
    }
    fn remove(&mut self, dyno: usize) {
        if !self.idle.is_empty() {
            self.idle.retain(|&d| d as usize != dyno);
        }
    }
    fn take_hit(&mut self) -> Option<usize> {
        self.hit.take().map(|d| d as usize)
    }
}
