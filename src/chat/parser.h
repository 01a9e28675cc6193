// Chat-template parser: tokens -> statements. Refuses, by name and line, any
// construct the interpreter cannot run (an unknown statement, filter, test,
// method or function), so a template is rejected when it is loaded rather
// than rendered wrongly.
#pragma once
#include <string_view>

#include "chat/ast.h"

namespace mt::chat {

// Throws TemplateError ("chat template: unsupported filter 'xyz' at line 3").
Body parse_template(std::string_view source);

}  // namespace mt::chat
