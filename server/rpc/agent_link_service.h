#pragma once

// The AgentLink service: one bidirectional Connect stream per agent. The stream reactor only
// moves messages: reads are posted to the core thread, writes come from the core thread through
// the AgentChannel interface with one write in flight. Agents authenticate with a bearer token.

#include <string>

#include "boost/asio/io_context.hpp"
#include "server/controller/controller.h"
#include "tae/v1/agent_link.grpc.pb.h"

namespace tae::rpc {

class AgentLinkService final : public tae::v1::AgentLink::CallbackService {
 public:
  AgentLinkService(boost::asio::io_context* core, controller::Controller* controller,
                   std::string token);

  grpc::ServerBidiReactor<tae::v1::AgentMessage, tae::v1::TaedMessage>* Connect(
      grpc::CallbackServerContext* ctx) override;

 private:
  boost::asio::io_context* core_;
  controller::Controller* controller_;
  std::string token_;
};

// Constant-time comparison of a presented "Bearer <token>" header against the expected token.
bool TokenMatches(std::string_view header, std::string_view token);

}  // namespace tae::rpc
