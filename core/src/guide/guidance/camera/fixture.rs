//! The element set the camera engine recognises, in one place: which window is which, and for
//! each element the role, UI framework, automation id and label a client's observation must
//! carry. docs/api.md has the same table for client authors (a test checks them against this).

/// The Teams window's `application`.
pub const TEAMS_APPLICATION: &str = "Microsoft Teams";

/// The Windows Settings window's `application`, either spelling.
pub const SETTINGS_APPLICATIONS: [&str; 2] = ["Settings", "Windows Settings"];

/// The Settings page the pinned profile may open directly from `teams_devices_open`.
pub const SETTINGS_LAUNCH_URI: &str = "ms-settings:privacy-webcam";

/// The UI framework of Teams' web content (WebView2).
pub const TEAMS_FRAMEWORK: &str = "Chrome";

/// The UI framework of the Settings app.
pub const SETTINGS_FRAMEWORK: &str = "XAML";

/// What an element must be to count as one piece of evidence: role and framework exactly,
/// confidence at least 0.8, and then its automation id (100) or, only when it has none, its
/// label (50).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementSpec {
    /// A short name for tables and tests.
    pub name: &'static str,
    /// The window it belongs to (`application`).
    pub window: &'static str,
    /// The element's `role`, exactly.
    pub role: &'static str,
    /// The element's `frameworkId`, exactly.
    pub framework_id: &'static str,
    /// The element's `automationId`.
    pub automation_id: &'static str,
    /// The element's `label`, used only when the element has no automation id.
    pub label: &'static str,
    /// What else the engine reads from it.
    pub reads: &'static str,
}

const fn teams(
    name: &'static str,
    role: &'static str,
    automation_id: &'static str,
    label: &'static str,
    reads: &'static str,
) -> ElementSpec {
    ElementSpec {
        name,
        window: TEAMS_APPLICATION,
        role,
        framework_id: TEAMS_FRAMEWORK,
        automation_id,
        label,
        reads,
    }
}

const fn settings(
    name: &'static str,
    role: &'static str,
    automation_id: &'static str,
    label: &'static str,
    reads: &'static str,
) -> ElementSpec {
    ElementSpec {
        name,
        window: "Settings",
        role,
        framework_id: SETTINGS_FRAMEWORK,
        automation_id,
        label,
        reads,
    }
}

/// The pre-join screen's camera switch.
pub const CAMERA_TOGGLE: ElementSpec = teams(
    "cameraToggle",
    "checkbox",
    "prejoin-camera-toggle",
    "Camera",
    "`toggleState` `off` or `on`",
);
/// The pre-join screen's notice that Windows blocks the camera.
pub const BLOCK_INDICATOR: ElementSpec = teams(
    "cameraBlockIndicator",
    "text",
    "prejoin-camera-blocked",
    "Your camera is turned off in Windows Settings",
    "presence",
);
/// The pre-join screen's button to the Windows camera settings.
pub const OPEN_CAMERA_SETTINGS: ElementSpec = teams(
    "openCameraSettings",
    "button",
    "prejoin-open-camera-settings",
    "Open camera settings",
    "`isEnabled` `true` (the next step's target)",
);
/// The Settings item of Teams' "Settings and more" menu.
pub const SETTINGS_MENU_ITEM: ElementSpec = teams(
    "settingsMenuItem",
    "menuitem",
    "settings-menu-item",
    "Settings",
    "`isEnabled` `true` (the next step's target)",
);
/// The Devices tab of Teams' settings.
pub const DEVICES_TAB: ElementSpec = teams(
    "devicesTab",
    "tab",
    "settings-devices-tab",
    "Devices",
    "`isSelected` `true` with the link below means the Devices page is open; otherwise `isEnabled` `true` (the next step's target)",
);
/// The Devices page's link to the Windows camera settings.
pub const DEVICES_CAMERA_SETTINGS: ElementSpec = teams(
    "devicesCameraSettings",
    "link",
    "devices-camera-privacy-link",
    "Camera privacy settings",
    "`isEnabled` `true` (the next step's target)",
);
/// The Settings page's title, which proves the page for the pinned profile.
pub const SETTINGS_PAGE_TITLE: ElementSpec = settings(
    "settingsPageTitle",
    "text",
    "privacy-webcam-page-title",
    "Camera",
    "presence",
);
/// The Settings switch that lets Teams use the camera.
pub const APP_PERMISSION_TOGGLE: ElementSpec = settings(
    "appPermissionToggle",
    "checkbox",
    "camera-app-toggle-microsoft-teams",
    "Microsoft Teams",
    "`toggleState` `off`/`on`; `isEnabled` `false` means managed; `targetable` `false` or `isOffscreen` `true` means not in reach",
);
/// The Settings notice that an organisation manages the camera permission.
pub const MANAGED_NOTICE: ElementSpec = settings(
    "managedNotice",
    "text",
    "camera-managed-notice",
    "Some of these settings are managed by your organization",
    "presence",
);

/// Every element the engine recognises, in the order docs/api.md lists them.
pub const ELEMENTS: [ElementSpec; 9] = [
    CAMERA_TOGGLE,
    BLOCK_INDICATOR,
    OPEN_CAMERA_SETTINGS,
    SETTINGS_MENU_ITEM,
    DEVICES_TAB,
    DEVICES_CAMERA_SETTINGS,
    SETTINGS_PAGE_TITLE,
    APP_PERMISSION_TOGGLE,
    MANAGED_NOTICE,
];
