#pragma once

// TLS for the agent link (docs/security.md). Both sides load and check their PEM files once, at
// start-up, so a wrong path, a key that does not match its certificate or an expired certificate
// is a one-line start-up error instead of a handshake failure later. Also the rule of when TLS
// is required: beyond loopback.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace tae::tls {

// True when address (host:port, optionally ipv4:/ipv6:/dns:/// prefixed) names a loopback host:
// 127.0.0.0/8, [::1] or localhost. Anything else, including wildcards such as 0.0.0.0, is not.
bool IsLoopback(const std::string& address);

// taed's side of the agent link, as named by --tls-cert, --tls-key and --tls-client-ca.
struct ServerFiles {
  std::string cert;       // PEM certificate chain, taed's certificate first
  std::string key;        // PEM private key of taed's certificate (unencrypted)
  std::string client_ca;  // set: agents must present a certificate this CA signed (mTLS)

  bool enabled() const { return !cert.empty() || !key.empty() || !client_ca.empty(); }
};

// Checks the files (readable PEM, key matches certificate, certificate currently valid) and
// returns credentials for grpc::ServerBuilder::AddListeningPort.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> LoadServerCredentials(
    const ServerFiles& files);

// The agent's side, as named by --tls-ca, --tls-cert, --tls-key and --tls-server-name.
struct ClientFiles {
  std::string ca;           // PEM CA that signed taed's certificate; empty: plaintext
  std::string cert;         // PEM client certificate (chain), for taed's --tls-client-ca
  std::string key;          // its private key
  std::string server_name;  // the name taed's certificate must carry, instead of the dialed host
};

// What the agent dials taed with, loaded once at start-up. No CA: plaintext.
struct ClientConfig {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::string server_name;

  bool enabled() const { return !ca_pem.empty(); }
};

// Reads and checks the files. Empty files.ca with any other field set is an error: the other
// fields mean nothing without TLS.
absl::StatusOr<ClientConfig> LoadClientConfig(const ClientFiles& files);

// grpc::SslCredentials trusting only config's CA (with the client certificate when set), or
// insecure credentials when TLS is off.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const ClientConfig& config);

}  // namespace tae::tls
