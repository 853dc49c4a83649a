// kit.h — state the lt-conformance main shares with the kit-only tests (KitTest.cpp).
#pragma once

#include <string>
#include <vector>

namespace ltkit {

// The backend under test and the op names its plugin claims (from the core's plugin report).
void set_claimed_ops(const std::string& backend, std::vector<std::string> ops);
const std::vector<std::string>& claimed_ops();

}  // namespace ltkit
