// Text a peer supplied, printed by taectl (common/text/utf8.h, ForTerminal).
#include <catch2/catch.hpp>
#include <string>

#include "common/text/utf8.h"

namespace tae::text {
namespace {

TEST_CASE("what an agent says of itself reaches the terminal as text, never as its codes",
          "[text]") {
  CHECK(ForTerminal("zone=us-central2-b") == "zone=us-central2-b");
  CHECK(ForTerminal("h\xc3\xa9llo\tthere") == "h\xc3\xa9llo\tthere");  // é and tab kept
  // ESC [ 2 J clears the screen; BEL, CR, DEL; the C1 CSI (U+009B) starts a sequence too.
  CHECK(ForTerminal("a\x1b[2Jb") == "a?[2Jb");
  CHECK(ForTerminal("\x07\r\n\x7f") == "????");
  CHECK(ForTerminal("x\xc2\x9b"
                    "31my") == "x?31my");
  CHECK(ForTerminal("\xff\x1b") == "\xef\xbf\xbd?");  // invalid bytes as U+FFFD first
}

}  // namespace
}  // namespace tae::text
