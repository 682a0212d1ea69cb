//! One series' accounting, kept apart from the network so that every odd sequence the
//! stream can produce is testable: images missing (gaps in image_id, or short at the end),
//! duplicates, messages of another series, a start that never came, ends sent twice.
//!
//! The series is the stream's: the detector's REST "sequence id" need not equal the stream's
//! series number (simulators number them differently), so the first start (or, when the
//! start was lost, the first image) names the series, and anything else is foreign.

use crate::stream::{Image, Start};

#[derive(Debug, Default)]
pub struct Series {
    /// Images the armed series will produce (nimages × ntrigger); `None` when open-ended.
    pub expected: Option<u64>,
    /// Distinct images of this series received.
    pub received: u64,
    /// Images known to be missing (gaps; at the end also the shortfall against `expected`).
    pub lost: u64,
    /// Messages that could not be decoded.
    pub invalid: u64,
    /// Messages out of place: another series', duplicates, duplicate ends, a missing start.
    pub foreign: u64,
    /// The series' start message, when it came.
    pub start: Option<Start>,
    id: Option<u64>,
    next_image: u64,
    gaps: u64,
    ended: bool,
}

impl Series {
    pub fn new(expected: Option<u64>) -> Series {
        Series {
            expected,
            ..Series::default()
        }
    }

    pub fn id(&self) -> Option<u64> {
        self.id
    }

    pub fn ended(&self) -> bool {
        self.ended
    }

    /// A start: names the series unless one is already under way.
    pub fn on_start(&mut self, start: Start) {
        match self.id {
            None => {
                self.id = Some(start.series_id);
                self.start = Some(start);
            }
            // The same series' start again (or after its first image, when it was late).
            Some(id) if id == start.series_id && self.start.is_none() => self.start = Some(start),
            Some(_) => self.foreign += 1,
        }
    }

    /// An image: true when it belongs to this series and is new, so it is to be published.
    pub fn on_image(&mut self, img: &Image) -> bool {
        match self.id {
            None => {
                // The start was lost: keep the images, count the missing start.
                self.id = Some(img.series_id);
                self.foreign += 1;
            }
            Some(id) if id != img.series_id || self.ended => {
                self.foreign += 1;
                return false;
            }
            Some(_) => {}
        }
        if img.image_id < self.next_image {
            self.foreign += 1; // a duplicate
            return false;
        }
        self.gaps += img.image_id - self.next_image;
        self.lost = self.gaps;
        self.next_image = img.image_id + 1;
        self.received += 1;
        true
    }

    /// An end: ends this series; anything else's end (or a second one) is foreign.
    pub fn on_end(&mut self, series_id: u64) {
        if self.id == Some(series_id) && !self.ended {
            self.ended = true;
            self.settle();
        } else {
            self.foreign += 1;
        }
    }

    pub fn on_invalid(&mut self) {
        self.invalid += 1;
    }

    /// Every image the series announced is here.
    pub fn all_received(&self) -> bool {
        self.expected.is_some_and(|n| self.received >= n)
    }

    /// The series is over as far as the stream can tell.
    pub fn complete(&self) -> bool {
        self.ended || self.all_received()
    }

    /// Final loss: gaps, or the shortfall against what was announced, whichever is more.
    pub fn settle(&mut self) {
        let short = self.expected.map_or(0, |n| n.saturating_sub(self.received));
        self.lost = self.gaps.max(short);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(id: u64) -> Start {
        Start {
            series_id: id,
            ..Start::default()
        }
    }

    fn image(series: u64, id: u64) -> Image {
        Image {
            series_id: series,
            image_id: id,
            series_unique_id: None,
            frames: Vec::new(),
            start_time: None,
            stop_time: None,
            real_time: None,
            series_date: None,
            appendix: None,
        }
    }

    #[test]
    fn a_clean_series_loses_nothing() {
        let mut s = Series::new(Some(3));
        s.on_start(start(7));
        assert!((0..3).all(|i| s.on_image(&image(7, i))));
        assert!(s.all_received());
        s.on_end(7);
        s.on_end(7); // sent twice: the second is foreign, not a second end
        assert_eq!((s.received, s.lost, s.foreign), (3, 0, 1));
    }

    #[test]
    fn gaps_and_a_short_end_are_lost() {
        let mut s = Series::new(Some(10));
        s.on_start(start(1));
        for i in [0, 1, 4, 5] {
            assert!(s.on_image(&image(1, i)));
        }
        assert_eq!(s.lost, 2);
        assert!(!s.on_image(&image(1, 4)), "a duplicate is not published");
        s.on_end(1);
        assert_eq!((s.received, s.lost, s.foreign), (4, 6, 1));
    }

    #[test]
    fn other_series_are_ignored_and_a_lost_start_is_counted() {
        let mut s = Series::new(None);
        s.on_end(4); // the previous series' late end
        assert!(
            s.on_image(&image(5, 0)),
            "the start was lost: the image is kept"
        );
        assert!(!s.on_image(&image(6, 1)));
        s.on_start(start(5)); // late start of this series: taken
        assert!(s.start.is_some());
        s.on_start(start(9));
        assert!(s.on_image(&image(5, 1)));
        s.on_end(5);
        assert!(!s.on_image(&image(5, 2)), "nothing after the end");
        assert_eq!((s.received, s.lost, s.foreign), (2, 0, 5));
    }
}
