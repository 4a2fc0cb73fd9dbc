// The web UI's stylesheet and script, compiled in from static/ (so the
// master serves them without files to install).
#pragma once

namespace herd::master::web {
extern const char kUiCss[];
extern const char kUiJs[];
}  // namespace herd::master::web
