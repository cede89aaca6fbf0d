#pragma once

// The CLI's plain-text tables and number formats are common/text/table.h's; the commands name
// them unqualified.

#include "common/text/table.h"

namespace tae::client {

using text::CsvField;
using text::FormatDuration;
using text::FormatNumber;
using text::FormatTime;
using text::Table;

}  // namespace tae::client
