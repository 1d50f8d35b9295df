//! The UI Automation backend: the top-level window is found among the desktop root's
//! control-view children by title (and process, when known), then walked with the
//! control-view tree walker on a blocking thread, since UI Automation is a synchronous COM API.

use std::time::Instant;

use uiautomation::{UIAutomation, UIElement, UITreeWalker};

use super::{
    A11yError, Budget, Collector, ElementStates, ScreenRect, Snapshot, Visit, WindowTarget,
};

pub(super) async fn snapshot(target: &WindowTarget, budget: Budget) -> Result<Snapshot, A11yError> {
    let target = target.clone();
    tokio::task::spawn_blocking(move || walk(&target, budget))
        .await
        .map_err(|e| A11yError::Unavailable(e.to_string()))?
}

fn walk(target: &WindowTarget, budget: Budget) -> Result<Snapshot, A11yError> {
    let mut collector = Collector::new(budget, Instant::now());
    let unavailable = |e: uiautomation::Error| A11yError::Unavailable(describe(&e));
    let automation = UIAutomation::new().map_err(unavailable)?;
    let walker = automation.get_control_view_walker().map_err(unavailable)?;
    let root = automation.get_root_element().map_err(unavailable)?;
    let window = find_window(&walker, &root, target).ok_or(A11yError::WindowNotFound)?;

    // Depth-first, document order: each popped node pushes its next sibling, then its first
    // child, so the child is visited first.
    let mut stack: Vec<(UIElement, usize, bool)> = vec![(window, 0, false)];
    while let Some((node, depth, has_siblings)) = stack.pop() {
        if has_siblings {
            match walker.get_next_sibling(&node) {
                Ok(next) => stack.push((next, depth, true)),
                Err(e) if failed(&e) => collector.lost_part(),
                Err(_) => {}
            }
        }
        let password = node.is_password().unwrap_or(true);
        let showing = node.is_offscreen().map(|off| !off).unwrap_or(false);
        match collector.visit(depth, password, showing) {
            Visit::Stop => break,
            Visit::SkipSubtree => continue,
            Visit::Enter => {}
        }
        if depth > 0 {
            let label = node.get_name().unwrap_or_default();
            let role = node
                .get_control_type()
                .map(|t| format!("{t:?}").to_lowercase())
                .unwrap_or_else(|_| "custom".to_owned());
            let bounds = node.get_bounding_rectangle().ok().and_then(|r| {
                ScreenRect::from_extents(r.get_left(), r.get_top(), r.get_width(), r.get_height())
            });
            let states = ElementStates {
                enabled: node.is_enabled().unwrap_or(false),
                focusable: node.is_keyboard_focusable().unwrap_or(false),
                focused: node.has_keyboard_focus().unwrap_or(false),
                ..ElementStates::default()
            };
            if !collector.keep(&role, &label, bounds, states) {
                break;
            }
        }
        if collector.descends(depth) {
            match walker.get_first_child(&node) {
                Ok(child) => stack.push((child, depth + 1, true)),
                Err(e) if failed(&e) => collector.lost_part(),
                Err(_) => {}
            }
        }
        if collector.out_of_time() {
            break;
        }
    }
    Ok(collector.finish(None))
}

/// A UI Automation failure in words, with its HRESULT: the system's text for a code can be
/// empty (Wine 8.0 has none for `REGDB_E_CLASSNOTREG`, which it answers for the UI Automation
/// object), and the code is what says why then.
pub(crate) fn describe(error: &uiautomation::Error) -> String {
    let text = error.message().trim();
    match (error.result(), text.is_empty()) {
        (Some(result), true) => format!("HRESULT 0x{:08X}", result.0),
        (Some(result), false) => format!("{text} (HRESULT 0x{:08X})", result.0),
        (None, true) => format!("UI Automation error {}", error.code()),
        (None, false) => text.to_owned(),
    }
}

/// Whether a walker step failed rather than found nothing: "no such element" arrives as an
/// error with a success code (a null element), a call that failed (the element went away, the
/// provider did not answer) with a failing HRESULT, and only that loses part of the tree.
fn failed(error: &uiautomation::Error) -> bool {
    error.result().is_some()
}

/// The desktop's child window titled `target.title`, preferring the one of `target.pid`.
fn find_window(
    walker: &UITreeWalker,
    root: &UIElement,
    target: &WindowTarget,
) -> Option<UIElement> {
    let mut fallback = None;
    let mut next = walker.get_first_child(root).ok();
    while let Some(window) = next {
        next = walker.get_next_sibling(&window).ok();
        if window.get_name().is_ok_and(|name| name == target.title) {
            let same_process = target
                .pid
                .is_none_or(|pid| window.get_process_id().is_ok_and(|p| p == pid));
            if same_process {
                return Some(window);
            }
            fallback.get_or_insert(window);
        }
    }
    fallback
}
