#include "common/tls/tls.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fs/fs.h"

namespace tae::tls {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// The oldest queued OpenSSL error as text (and clears the queue), or "" when there is none.
std::string TakeOpenSslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) {
    return "";
  }
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

// "FLAG FILE: " for error messages.
std::string Where(const char* flag, const std::string& path) {
  return absl::StrCat(flag, " ", path, ": ");
}

absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path) {
  absl::StatusOr<std::string> text = fs::ReadFile(path);
  if (!text.ok()) {
    const fs::ErrnoParts parts = fs::SplitErrnoStatus(text.status());
    return absl::InvalidArgumentError(absl::StrCat(
        Where(flag, path),
        "cannot read: ", parts.reason.empty() ? text.status().message() : parts.reason));
  }
  return text;
}

BioPtr MemoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Every certificate in pem, in order; at least one.
absl::StatusOr<std::vector<X509Ptr>> ParseCertificates(const char* flag, const std::string& path,
                                                       const std::string& pem) {
  BioPtr bio = MemoryBio(pem);
  std::vector<X509Ptr> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // the read that ended the loop failed by design (no more PEM blocks)
  if (certs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(flag, path), "no PEM certificate (-----BEGIN CERTIFICATE-----) in it"));
  }
  return certs;
}

std::string TimeText(const ASN1_TIME* time) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(bio.get(), time);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::Status CheckValidNow(const char* flag, const std::string& path, X509* cert) {
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    return absl::InvalidArgumentError(absl::StrCat(Where(flag, path),
                                                   "the certificate is not valid before ",
                                                   TimeText(X509_get0_notBefore(cert))));
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(Where(flag, path), "the certificate expired on ",
                                                   TimeText(X509_get0_notAfter(cert))));
  }
  return absl::OkStatus();
}

// Never prompts for a passphrase (OpenSSL's default callback reads the terminal).
int NoPassphrase(char*, int, int, void*) { return 0; }

// Reads a certificate chain and its key, checks that they belong together and that the
// certificate is valid now. Returns {cert_pem, key_pem}.
absl::StatusOr<std::pair<std::string, std::string>> LoadKeyPair(const char* cert_flag,
                                                                const std::string& cert_path,
                                                                const char* key_flag,
                                                                const std::string& key_path) {
  absl::StatusOr<std::string> cert_pem = ReadPem(cert_flag, cert_path);
  if (!cert_pem.ok()) {
    return cert_pem.status();
  }
  absl::StatusOr<std::string> key_pem = ReadPem(key_flag, key_path);
  if (!key_pem.ok()) {
    return key_pem.status();
  }
  absl::StatusOr<std::vector<X509Ptr>> chain = ParseCertificates(cert_flag, cert_path, *cert_pem);
  if (!chain.ok()) {
    return chain.status();
  }
  BioPtr bio = MemoryBio(*key_pem);
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  if (key == nullptr) {
    std::string why = TakeOpenSslError();
    return absl::InvalidArgumentError(
        absl::StrCat(Where(key_flag, key_path), "not an unencrypted PEM private key (", why, ")"));
  }
  X509* leaf = chain->front().get();
  if (X509_check_private_key(leaf, key.get()) != 1) {
    TakeOpenSslError();
    return absl::InvalidArgumentError(
        absl::StrCat(Where(key_flag, key_path), "does not match the certificate in ", cert_path));
  }
  if (absl::Status valid = CheckValidNow(cert_flag, cert_path, leaf); !valid.ok()) {
    return valid;
  }
  return std::make_pair(std::move(*cert_pem), std::move(*key_pem));
}

absl::StatusOr<std::string> LoadCa(const char* flag, const std::string& path) {
  absl::StatusOr<std::string> pem = ReadPem(flag, path);
  if (!pem.ok()) {
    return pem.status();
  }
  absl::StatusOr<std::vector<X509Ptr>> certs = ParseCertificates(flag, path, *pem);
  if (!certs.ok()) {
    return certs.status();
  }
  return std::move(*pem);
}

}  // namespace

bool IsLoopback(const std::string& address) {
  std::string rest = address;
  for (const char* scheme : {"dns:///", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(rest, scheme)) {
      rest = rest.substr(strlen(scheme));
      break;
    }
  }
  std::string host;
  if (absl::StartsWith(rest, "[")) {
    size_t end = rest.find(']');
    if (end == std::string::npos) {
      return false;
    }
    host = rest.substr(1, end - 1);
  } else {
    size_t colon = rest.rfind(':');
    host = colon == std::string::npos ? rest : rest.substr(0, colon);
  }
  host = absl::AsciiStrToLower(host);
  if (host == "localhost") {
    return true;
  }
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  return false;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> LoadServerCredentials(
    const ServerFiles& files) {
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError(files.client_ca.empty()
                                          ? "--tls-cert and --tls-key go together: set both"
                                          : "--tls-client-ca needs --tls-cert and --tls-key");
  }
  absl::StatusOr<std::pair<std::string, std::string>> pair =
      LoadKeyPair("--tls-cert", files.cert, "--tls-key", files.key);
  if (!pair.ok()) {
    return pair.status();
  }
  grpc::SslServerCredentialsOptions options(
      files.client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_key_cert_pairs.push_back({pair->second, pair->first});
  if (!files.client_ca.empty()) {
    absl::StatusOr<std::string> ca = LoadCa("--tls-client-ca", files.client_ca);
    if (!ca.ok()) {
      return ca.status();
    }
    options.pem_root_certs = std::move(*ca);
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<ClientConfig> LoadClientConfig(const ClientFiles& files) {
  ClientConfig config;
  if (files.ca.empty()) {
    if (!files.cert.empty() || !files.key.empty() || !files.server_name.empty()) {
      return absl::InvalidArgumentError(
          "--tls-cert, --tls-key and --tls-server-name need --tls-ca (the CA that signed "
          "taed's certificate)");
    }
    return config;
  }
  absl::StatusOr<std::string> ca = LoadCa("--tls-ca", files.ca);
  if (!ca.ok()) {
    return ca.status();
  }
  config.ca_pem = std::move(*ca);
  config.server_name = files.server_name;
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: set both");
  }
  if (!files.cert.empty()) {
    absl::StatusOr<std::pair<std::string, std::string>> pair =
        LoadKeyPair("--tls-cert", files.cert, "--tls-key", files.key);
    if (!pair.ok()) {
      return pair.status();
    }
    config.cert_pem = std::move(pair->first);
    config.key_pem = std::move(pair->second);
  }
  return config;
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const ClientConfig& config) {
  if (!config.enabled()) {
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = config.ca_pem;
  options.pem_cert_chain = config.cert_pem;
  options.pem_private_key = config.key_pem;
  return grpc::SslCredentials(options);
}

}  // namespace tae::tls
