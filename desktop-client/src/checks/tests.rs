//! Tests of `checks`.

use local_core::guide::guidance::model::{Bounds, Observation};

use super::*;

const WINDOW: ScreenRect = ScreenRect {
    x: 100,
    y: 50,
    width: 400,
    height: 200,
};

fn button(label: &str, x: f64) -> Element {
    Element {
        role: "button".to_owned(),
        label: label.to_owned(),
        bounds: Bounds {
            x,
            y: 0.5,
            width: 0.25,
            height: 0.25,
        },
        confidence: 0.95,
        is_enabled: Some(true),
        is_offscreen: Some(false),
        ..Element::default()
    }
}

fn window() -> WindowInfo {
    WindowInfo {
        id: 7,
        pid: Some(1),
        title: "MSGuide Demo".to_owned(),
        bounds: WINDOW,
        minimized: false,
        placed: true,
    }
}

fn capture(at: OffsetDateTime, elements: Vec<Element>) -> WindowObservation {
    WindowObservation {
        window: window(),
        observation: Observation {
            id: "obs".to_owned(),
            window_id: "window-7".to_owned(),
            application: "MSGuide Demo".to_owned(),
            captured_at: at,
            width: 400,
            height: 200,
            ocr_text: String::new(),
            elements,
            image: None,
            automation_complete: true,
            resource_id: None,
        },
    }
}

fn answer(label: &str, x: f64) -> GuidanceIn {
    GuidanceIn {
        instruction: "Demo: select it".to_owned(),
        status: "next_step".to_owned(),
        target: Some(TargetIn {
            label: label.to_owned(),
            bounds: [x, 0.5, 0.25, 0.25],
            confidence: 0.95,
            is_enabled: Some(true),
            is_offscreen: Some(false),
            target_id: None,
            action: None,
        }),
        mode: "demo".to_owned(),
        correlation_id: "c".to_owned(),
        observation_id: "obs".to_owned(),
        window_id: "window-7".to_owned(),
        remaining_work: None,
        plan: None,
        task_id: None,
        step: None,
    }
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

#[test]
fn a_fresh_matching_answer_is_drawn_at_the_elements_screen_position() {
    let c = capture(now(), vec![button("View logs", 0.5), button("Other", 0.0)]);
    let rect = check_before_drawing(&c, &answer("View logs", 0.5), Some(&window()), now());
    assert_eq!(
        rect,
        Ok(ScreenRect {
            x: 300,
            y: 150,
            width: 100,
            height: 50
        })
    );
}

#[test]
fn a_capture_60_seconds_old_is_not_drawn_and_59_is() {
    let t = now();
    let c = |age: i64| {
        capture(
            t - time::Duration::seconds(age),
            vec![button("View logs", 0.5)],
        )
    };
    let a = answer("View logs", 0.5);
    assert!(check_before_drawing(&c(59), &a, Some(&window()), t).is_ok());
    assert_eq!(
        check_before_drawing(&c(60), &a, Some(&window()), t),
        Err(DrawRefusal::Stale(60))
    );
    assert_eq!(
        check_before_drawing(&c(-1), &a, Some(&window()), t),
        Err(DrawRefusal::Stale(-1))
    );
}

#[test]
fn an_answer_about_another_capture_or_window_is_not_drawn() {
    let c = capture(now(), vec![button("View logs", 0.5)]);
    let mut other = answer("View logs", 0.5);
    other.observation_id = "old".to_owned();
    assert_eq!(
        check_before_drawing(&c, &other, Some(&window()), now()),
        Err(DrawRefusal::OtherObservation)
    );
    let mut other = answer("View logs", 0.5);
    other.window_id = "window-8".to_owned();
    assert_eq!(
        check_before_drawing(&c, &other, Some(&window()), now()),
        Err(DrawRefusal::OtherWindow)
    );
    let mut done = answer("View logs", 0.5);
    done.status = "completed".to_owned();
    assert_eq!(
        check_before_drawing(&c, &done, Some(&window()), now()),
        Err(DrawRefusal::NoTarget)
    );
}

#[test]
fn a_window_that_moved_changed_or_closed_is_not_drawn_on() {
    let c = capture(now(), vec![button("View logs", 0.5)]);
    let a = answer("View logs", 0.5);
    let mut moved = window();
    moved.bounds.x += 1;
    assert_eq!(
        check_before_drawing(&c, &a, Some(&moved), now()),
        Err(DrawRefusal::WindowMoved)
    );
    let mut renamed = window();
    renamed.title = "Other".to_owned();
    assert_eq!(
        check_before_drawing(&c, &a, Some(&renamed), now()),
        Err(DrawRefusal::WindowChanged)
    );
    let mut replaced = window();
    replaced.id = 8;
    assert_eq!(
        check_before_drawing(&c, &a, Some(&replaced), now()),
        Err(DrawRefusal::WindowGone)
    );
    assert_eq!(
        check_before_drawing(&c, &a, None, now()),
        Err(DrawRefusal::WindowGone)
    );
}

#[test]
fn the_target_must_match_exactly_one_element() {
    let twice = capture(
        now(),
        vec![button("View logs", 0.5), button("View logs", 0.5)],
    );
    assert_eq!(
        check_before_drawing(&twice, &answer("View logs", 0.5), Some(&window()), now()),
        Err(DrawRefusal::NotExactlyOne(2))
    );
    let c = capture(now(), vec![button("View logs", 0.5)]);
    for wrong in [answer("View log", 0.5), answer("View logs", 0.500_01)] {
        assert_eq!(
            check_before_drawing(&c, &wrong, Some(&window()), now()),
            Err(DrawRefusal::NotExactlyOne(0))
        );
    }
    // Within the tolerance is the same box.
    assert!(
        check_before_drawing(
            &c,
            &answer("View logs", 0.500_000_5),
            Some(&window()),
            now()
        )
        .is_ok()
    );
    let mut disabled = button("View logs", 0.5);
    disabled.is_enabled = Some(false);
    let c = capture(now(), vec![disabled]);
    assert_eq!(
        check_before_drawing(&c, &answer("View logs", 0.5), Some(&window()), now()),
        Err(DrawRefusal::NotExactlyOne(0))
    );
    let mut overconfident = answer("View logs", 0.5);
    if let Some(t) = overconfident.target.as_mut() {
        t.confidence = 0.99;
    }
    let c = capture(now(), vec![button("View logs", 0.5)]);
    assert_eq!(
        check_before_drawing(&c, &overconfident, Some(&window()), now()),
        Err(DrawRefusal::NotExactlyOne(0))
    );
}

#[test]
fn the_target_is_still_there_only_while_exactly_one_element_matches_it() {
    let answer = answer("View logs", 0.25);
    let fresh = |elements| capture(now(), elements).observation;
    assert!(target_still_there(
        &answer,
        &fresh(vec![button("View logs", 0.25), button("Other", 0.5)])
    ));
    // The step was taken: another button in its place, the same one moved or disabled, or it
    // came twice.
    assert!(!target_still_there(
        &answer,
        &fresh(vec![button("Open troubleshooting", 0.25)])
    ));
    assert!(!target_still_there(
        &answer,
        &fresh(vec![button("View logs", 0.5)])
    ));
    let mut disabled = button("View logs", 0.25);
    disabled.is_enabled = Some(false);
    assert!(!target_still_there(&answer, &fresh(vec![disabled])));
    assert!(!target_still_there(
        &answer,
        &fresh(vec![button("View logs", 0.25), button("View logs", 0.25)])
    ));
    let mut no_target = answer;
    no_target.target = None;
    assert!(!target_still_there(
        &no_target,
        &fresh(vec![button("View logs", 0.25)])
    ));
}
