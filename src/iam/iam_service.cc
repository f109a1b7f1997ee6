#include "iam/iam_service.h"

#include <nlohmann/json.hpp>

#include <openssl/rand.h>

#include <algorithm>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/time_format.h"
#include "iam/tokens.h"
#include "obs/log.h"

namespace mle::iam {
namespace {

using nlohmann::json;

// ---- the stored records (db::Record bodies): this file reads and writes them ----
constexpr char kUserKind[] = "iam.user";
constexpr char kAccountKind[] = "iam.serviceAccount";
constexpr char kTokenKind[] = "iam.token";
constexpr char kPolicyKind[] = "iam.policy";
constexpr char kBucketKind[] = "iam.bucket";

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }
absl::Time FromMicros(int64_t us) { return absl::FromUnixMicros(us); }

db::Mutation Put(const char* kind, const std::string& key, const json& body) {
  return db::PutRecord{{kind, key, body.dump()}};
}
db::Mutation Delete(const char* kind, const std::string& key) { return db::DeleteRecord{kind, key}; }

json EncodeUser(const User& u) { return {{"email", u.email}, {"createTimeUs", Micros(u.create_time)}}; }
json EncodeAccount(const ServiceAccount& a) {
  return {{"project", a.project},         {"accountId", a.account_id},
          {"email", a.email},             {"uniqueId", a.unique_id},
          {"displayName", a.display_name}, {"description", a.description},
          {"createTimeUs", Micros(a.create_time)}, {"serviceAgent", a.service_agent}};
}
json EncodePolicy(const Policy& p) {
  json bindings = json::array();
  for (const auto& b : p.bindings) bindings.push_back({{"role", b.role}, {"members", b.members}});
  return {{"version", p.version}, {"revision", p.revision}, {"bindings", bindings}};
}

absl::Status Corrupt(const db::Record& r, const std::string& what) {
  return absl::DataLossError(absl::StrCat("the stored ", r.kind, " record \"", r.key, "\" is unreadable: ", what));
}

constexpr absl::Duration kMaxAccessTokenLifetime = absl::Hours(12);

std::string RandomDigits(int n) {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) std::abort();
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>('0' + (i == 0 ? 1 + bytes[i] % 9 : bytes[i] % 10)));
  return out;
}

// Google's rule for accountId: 6-30 characters, a lowercase letter first,
// then lowercase letters, digits and hyphens, not ending in a hyphen.
bool ValidAccountId(const std::string& id) {
  if (id.size() < 6 || id.size() > 30 || !absl::ascii_islower(static_cast<unsigned char>(id[0])) ||
      id.back() == '-') {
    return false;
  }
  return std::all_of(id.begin(), id.end(), [](char c) {
    return absl::ascii_islower(static_cast<unsigned char>(c)) || absl::ascii_isdigit(static_cast<unsigned char>(c)) ||
           c == '-';
  });
}


}  // namespace

IamService::IamService(db::Store& store, common::Clock& clock, std::string operator_token)
    : store_(store), clock_(clock), operator_token_(std::move(operator_token)) {}


absl::Status IamService::Recover() {
  auto records = store_.LoadRecords("iam.");
  if (!records.ok()) return records.status();
  std::unique_lock lock(mu_);
  for (const db::Record& r : *records) {
    json body = json::parse(r.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) return Corrupt(r, "not a JSON object");
    try {
      if (r.kind == kUserKind) {
        users_[r.key] = {body.at("email").get<std::string>(), FromMicros(body.at("createTimeUs").get<int64_t>())};
      } else if (r.kind == kAccountKind) {
        ServiceAccount a;
        a.project = body.at("project").get<std::string>();
        a.account_id = body.at("accountId").get<std::string>();
        a.email = body.at("email").get<std::string>();
        a.unique_id = body.at("uniqueId").get<std::string>();
        a.display_name = body.at("displayName").get<std::string>();
        a.description = body.at("description").get<std::string>();
        a.create_time = FromMicros(body.at("createTimeUs").get<int64_t>());
        a.service_agent = body.at("serviceAgent").get<bool>();
        accounts_[r.key] = std::move(a);
      } else if (r.kind == kTokenKind) {
        tokens_[r.key] = {body.at("member").get<std::string>(), FromMicros(body.at("expireTimeUs").get<int64_t>()),
                          body.at("purpose").get<std::string>()};
      } else if (r.kind == kPolicyKind) {
        Policy p;
        p.version = body.at("version").get<int32_t>();
        p.revision = body.at("revision").get<int64_t>();
        for (const auto& b : body.at("bindings")) {
          p.bindings.push_back({b.at("role").get<std::string>(), b.at("members").get<std::vector<std::string>>()});
        }
        policies_[r.key] = std::move(p);
      } else if (r.kind == kBucketKind) {
        bucket_owner_[r.key] = body.at("project").get<std::string>();
      }
    } catch (const json::exception& e) {
      return Corrupt(r, e.what());
    }
  }
  return absl::OkStatus();
}

// ---- authentication and authorization ----

absl::StatusOr<Principal> IamService::Authenticate(absl::string_view token) const {
  if (SameHash(token, operator_token_)) return Principal::Operator();
  const std::string hash = TokenHash(token);
  std::shared_lock lock(mu_);
  auto it = tokens_.find(hash);
  if (it == tokens_.end() || !SameHash(it->first, hash)) {
    return absl::UnauthenticatedError(
        "Request had invalid authentication credentials: the bearer token is not valid (unknown or revoked).");
  }
  if (clock_.Now() >= it->second.expire_time) {
    return absl::UnauthenticatedError(absl::StrCat(
        "Request had invalid authentication credentials: the bearer token expired at ",
        common::FormatRfc3339(it->second.expire_time),
        ". Get a new one: a user asks the operator (`mlengine admin users create-token EMAIL`), a service "
        "account's token comes from `mlengine auth print-access-token --impersonate-service-account=EMAIL`."));
  }
  if (!PrincipalExists(it->second.member)) {
    return absl::UnauthenticatedError(absl::StrCat("Request had invalid authentication credentials: ",
                                                   it->second.member, " no longer exists."));
  }
  auto principal = PrincipalOfMember(it->second.member);
  if (!principal) return absl::InternalError("a token names no principal");
  return *principal;
}

PolicyChain IamService::ChainOf(const Resource& resource) const {
  PolicyChain chain;
  auto add = [&](const std::string& name) {
    auto it = policies_.find(name);
    if (it != policies_.end()) chain.push_back(&it->second);
  };
  std::string project = resource.project;
  if (resource.kind == ResourceKind::kBucket) {
    auto owner = bucket_owner_.find(resource.id);
    if (owner == bucket_owner_.end()) return chain;  // nobody's: the operator's alone
    project = owner->second;
  } else if (resource.kind != ResourceKind::kProject) {
    add(resource.Name());
  }
  const std::string name = ProjectResource(project);
  if (policies_.count(name)) {
    add(name);
  } else if (const Policy* initial = InitialPolicyOf(project)) {
    chain.push_back(initial);
  }
  return chain;
}

const Policy* IamService::InitialPolicyOf(const std::string& project) const {
  if (projects_ == nullptr) return nullptr;
  {
    std::lock_guard<std::mutex> lock(initial_mu_);
    if (auto it = initial_policies_.find(project); it != initial_policies_.end()) return &it->second;
  }
  const std::optional<model::Project> p = projects_->FindProject(project);
  if (!p) return nullptr;
  Policy policy;
  policy.bindings.push_back({std::string(kInitialDefaultAccountRole), {"serviceAccount:" + DefaultAccountEmail(p->number)}});
  std::lock_guard<std::mutex> lock(initial_mu_);
  return &initial_policies_.emplace(project, std::move(policy)).first->second;
}

absl::Status IamService::Authorize(const Principal& who, absl::string_view permission,
                                   const Resource& resource) const {
  if (who.IsOperator()) return absl::OkStatus();
  std::shared_lock lock(mu_);
  const PolicyChain chain = ChainOf(resource);
  if (Grants(who, permission, chain)) return absl::OkStatus();  // the name is spelled only for a denial
  return iam::Authorize(who, permission, resource.Name(), chain);
}

std::optional<std::string> IamService::DefaultAccountProject(const std::string& email) const {
  absl::string_view digits = email;
  int64_t number = 0;
  if (projects_ == nullptr || !absl::ConsumePrefix(&digits, "service-") ||
      !absl::ConsumeSuffix(&digits, kDefaultAccountDomain) || !absl::SimpleAtoi(digits, &number)) {
    return std::nullopt;
  }
  auto p = projects_->FindProjectByNumber(number);
  if (!p) return std::nullopt;
  return p->id;
}

bool IamService::PrincipalExists(const std::string& member) const {
  auto p = PrincipalOfMember(member);
  if (!p) return false;
  if (p->kind == PrincipalKind::kUser) return users_.count(p->email) > 0;
  return accounts_.count(p->email) > 0 || DefaultAccountProject(p->email).has_value();
}

// ---- policies ----

Policy IamService::GetPolicy(const Resource& resource) const {
  std::shared_lock lock(mu_);
  auto it = policies_.find(resource.Name());
  if (it != policies_.end()) return it->second;
  if (resource.kind == ResourceKind::kProject) {
    if (const Policy* initial = InitialPolicyOf(resource.project)) return *initial;
  }
  return Policy{};
}

absl::Status IamService::CheckMembersExist(const Policy& policy) const {
  for (const auto& b : policy.bindings) {
    for (const auto& m : b.members) {
      if (m == kAllAuthenticatedUsers || PrincipalExists(m)) continue;
      auto p = PrincipalOfMember(m);
      if (p && p->kind == PrincipalKind::kServiceAccount && absl::EndsWith(p->email, kTpuAccountDomain)) {
        const std::string number = p->email.substr(8, p->email.find('@') - 8);
        return absl::InvalidArgumentError(absl::StrCat(
            "Service account ", p->email,
            " does not exist yet: it is the TPU service identity of project number ", number,
            ", created by POST /v1beta1/projects/", number,
            "/services/tpu.googleapis.com:generateServiceIdentity (mlengine services identity create "
            "--service=tpu.googleapis.com --project=PROJECT)."));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          p && p->kind == PrincipalKind::kUser ? "User " : "Service account ", p ? p->email : m,
          " does not exist.",
          p && p->kind == PrincipalKind::kUser ? " The operator creates users (mlengine admin users create)." : ""));
    }
  }
  return absl::OkStatus();
}

void IamService::SetPolicy(const Principal& who, const Resource& resource, Policy policy,
                           std::optional<std::string> etag, Callback<Policy> done) {
  Write([this, who, resource, policy = std::move(policy), etag = std::move(etag),
         done = std::move(done)]() mutable -> std::optional<Change> {
    const std::string name = resource.Name();
    Policy current;
    {
      std::shared_lock lock(mu_);
      auto it = policies_.find(name);
      if (it != policies_.end()) {
        current = it->second;
      } else if (const Policy* initial = resource.kind == ResourceKind::kProject ? InitialPolicyOf(resource.project)
                                                                                  : nullptr) {
        current = *initial;
      }
      absl::Status refused;
      if (etag && *etag != EtagOf(current.revision)) {
        refused = absl::AbortedError(
            "There were concurrent policy changes. Please retry the whole read-modify-write with exponential "
            "backoff.");
      }
      if (refused.ok()) refused = NormalizePolicy(resource.kind, &policy);
      if (refused.ok()) refused = CheckMembersExist(policy);
      if (refused.ok()) refused = CheckNoEscalation(who, current, policy, name, ChainOf(resource));
      if (!refused.ok()) {
        lock.unlock();
        done(refused);
        return std::nullopt;
      }
    }
    policy.revision = current.revision + 1;
    return Change{{Put(kPolicyKind, name, EncodePolicy(policy))},
                  [this, name, policy] { policies_[name] = policy; },
                  [done, policy](absl::Status s) { s.ok() ? done(policy) : done(s); }};
  });
}

absl::StatusOr<std::vector<std::string>> IamService::TestPermissions(
    const Principal& who, const Resource& resource, const std::vector<std::string>& permissions) const {
  for (const auto& p : permissions) {
    if (!IsKnownPermission(p)) {
      return absl::InvalidArgumentError(absl::StrCat("Permission ", p, " is not valid."));
    }
  }
  std::shared_lock lock(mu_);
  return HeldPermissions(who, permissions, ChainOf(resource));
}

// ---- service accounts ----

std::optional<ServiceAccount> IamService::FindAccount(const std::string& project, const std::string& id) const {
  const std::string key = absl::AsciiStrToLower(id);
  auto it = accounts_.find(key);
  if (it == accounts_.end()) {
    it = std::find_if(accounts_.begin(), accounts_.end(), [&](const auto& kv) { return kv.second.unique_id == id; });
  }
  if (it == accounts_.end()) return std::nullopt;
  if (project != "-" && it->second.project != project) return std::nullopt;
  return it->second;
}

void IamService::CreateServiceAccount(const std::string& project, const std::string& account_id, ServiceAccount fields,
                                      Callback<ServiceAccount> done) {
  if (!ValidAccountId(account_id)) {
    return done(absl::InvalidArgumentError(absl::StrCat(
        "accountId \"", account_id,
        "\" is not valid: it must be 6-30 characters of lowercase letters, digits and hyphens, start with a letter "
        "and not end with a hyphen.")));
  }
  ServiceAccount a = std::move(fields);
  a.project = project;
  a.account_id = account_id;
  a.email = absl::AsciiStrToLower(absl::StrCat(account_id, "@", project, ".iam.mlengine.local"));
  if (!ValidEmail(a.email)) {
    return done(absl::InvalidArgumentError(absl::StrCat(
        "Project ", project, " cannot hold service accounts: its id does not make a valid email domain (", a.email,
        ").")));
  }
  if (a.display_name.size() > 100) {
    return done(absl::InvalidArgumentError("serviceAccount.displayName is longer than 100 bytes."));
  }
  if (a.description.size() > 256) {
    return done(absl::InvalidArgumentError("serviceAccount.description is longer than 256 bytes."));
  }
  a.unique_id = RandomDigits(21);
  a.create_time = clock_.Now();
  a.service_agent = false;
  Write([this, a = std::move(a), done = std::move(done)]() -> std::optional<Change> {
    bool exists;
    {
      std::shared_lock lock(mu_);
      exists = accounts_.count(a.email) > 0;
    }
    if (exists) {
      done(absl::AlreadyExistsError(absl::StrCat("Service account ", a.account_id,
                                                 " already exists within project projects/", a.project, ".")));
      return std::nullopt;
    }
    return Change{{Put(kAccountKind, a.email, EncodeAccount(a))},
                  [this, a] { accounts_[a.email] = a; },
                  [done, a](absl::Status s) { s.ok() ? done(a) : done(s); }};
  });
}

absl::StatusOr<ServiceAccount> IamService::GetServiceAccount(const std::string& project, const std::string& id) const {
  std::shared_lock lock(mu_);
  auto a = FindAccount(project, id);
  if (!a) {
    return absl::NotFoundError(absl::StrCat("Unknown service account: projects/", project, "/serviceAccounts/", id));
  }
  return *a;
}

absl::StatusOr<AccountPage> IamService::ListServiceAccounts(const std::string& project, int page_size,
                                                            const std::string& page_token) const {
  if (page_size <= 0) page_size = 20;
  page_size = std::min(page_size, 100);
  AccountPage page;
  std::shared_lock lock(mu_);
  for (auto it = accounts_.upper_bound(page_token); it != accounts_.end(); ++it) {
    if (it->second.project != project) continue;
    if (static_cast<int>(page.accounts.size()) == page_size) {
      page.next_page_token = page.accounts.back().email;
      break;
    }
    page.accounts.push_back(it->second);
  }
  return page;
}

std::vector<db::Mutation> IamService::ForgetMember(const std::string& member,
                                                   std::map<std::string, Policy>* changed) const {
  std::vector<db::Mutation> writes;
  for (const auto& [hash, t] : tokens_) {
    if (t.member == member) writes.push_back(Delete(kTokenKind, hash));
  }
  for (const auto& [name, policy] : policies_) {
    Policy p = policy;
    bool touched = false;
    for (auto& b : p.bindings) touched = std::erase(b.members, member) > 0 || touched;
    if (!touched) continue;
    std::erase_if(p.bindings, [](const Binding& b) { return b.members.empty(); });
    ++p.revision;
    writes.push_back(Put(kPolicyKind, name, EncodePolicy(p)));
    (*changed)[name] = std::move(p);
  }
  return writes;
}

void IamService::DeleteServiceAccount(const std::string& project, const std::string& id, StatusCallback done) {
  Write([this, project, id, done = std::move(done)]() -> std::optional<Change> {
    std::shared_lock lock(mu_);
    auto a = FindAccount(project, id);
    absl::Status refused;
    if (!a) {
      refused = absl::NotFoundError(absl::StrCat("Unknown service account: projects/", project, "/serviceAccounts/", id));
    } else if (a->service_agent) {
      refused = absl::FailedPreconditionError(absl::StrCat(
          a->email, " is the project's TPU service identity, managed by mlengine: it cannot be deleted. Revoke its "
                    "roles instead."));
    }
    if (!refused.ok()) {
      lock.unlock();
      done(refused);
      return std::nullopt;
    }
    const std::string member = Principal::ServiceAccount(a->email).Member();
    const std::string own_policy = ServiceAccountResource(a->project, a->email);
    std::map<std::string, Policy> changed;
    std::vector<db::Mutation> writes = ForgetMember(member, &changed);
    writes.push_back(Delete(kAccountKind, a->email));
    writes.push_back(Delete(kPolicyKind, own_policy));
    return Change{std::move(writes),
                  [this, email = a->email, member, own_policy, changed = std::move(changed)]() mutable {
                    std::erase_if(tokens_, [&](const auto& kv) { return kv.second.member == member; });
                    for (auto& [name, p] : changed) policies_[name] = std::move(p);
                    policies_.erase(own_policy);
                    accounts_.erase(email);
                  },
                  done};
  });
}

// ---- tokens ----

IamService::Change IamService::Mint(const std::string& member, absl::Duration lifetime, const std::string& purpose,
                                    Callback<IssuedToken> done) {
  // Expired tokens go in the same commit. mu_ is held (shared).
  IssuedToken issued{NewToken(), clock_.Now() + lifetime};
  const std::string hash = TokenHash(issued.token);
  std::vector<db::Mutation> writes;
  std::vector<std::string> expired;
  for (const auto& [h, t] : tokens_) {
    if (t.expire_time <= clock_.Now()) expired.push_back(h);
  }
  for (const auto& h : expired) writes.push_back(Delete(kTokenKind, h));
  writes.push_back(Put(kTokenKind, hash,
                       {{"member", member}, {"expireTimeUs", Micros(issued.expire_time)}, {"purpose", purpose}}));
  return Change{std::move(writes),
                [this, expired, hash, token = Token{member, issued.expire_time, purpose}] {
                  for (const auto& h : expired) tokens_.erase(h);
                  tokens_[hash] = token;
                },
                [done, issued](absl::Status s) { s.ok() ? done(issued) : done(s); }};
}

void IamService::GenerateAccessToken(const Principal& who, const std::string& project, const std::string& account,
                                     const std::vector<std::string>& delegates, absl::Duration lifetime,
                                     Callback<IssuedToken> done) {
  if (lifetime <= absl::ZeroDuration() || lifetime > kMaxAccessTokenLifetime) {
    return done(absl::InvalidArgumentError(absl::StrCat(
        "lifetime must be between 1s and 43200s (12 hours); got ", absl::FormatDuration(lifetime), ".")));
  }
  Write([this, who, project, account, delegates, lifetime, done = std::move(done)]() -> std::optional<Change> {
    std::string email;
    {
      std::shared_lock lock(mu_);
      auto refuse = [&](absl::Status s) {
        lock.unlock();
        done(std::move(s));
        return std::nullopt;
      };
      // The chain: who -> delegates[0] -> ... -> account; each link holds
      // getAccessToken on the next.
      Principal holder = who;
      std::vector<std::string> chain = delegates;
      chain.push_back(account);
      for (size_t i = 0; i < chain.size(); ++i) {
        std::string id = chain[i];
        std::string in_project = project;
        if (absl::StartsWith(id, "projects/")) {  // delegates are full names
          const std::vector<std::string> parts = absl::StrSplit(id, '/');
          if (parts.size() != 4 || parts[2] != "serviceAccounts") {
            return refuse(absl::InvalidArgumentError(absl::StrCat("delegates[", i, "] \"", id,
                                                                  "\" is not projects/-/serviceAccounts/EMAIL.")));
          }
          in_project = parts[1];
          id = parts[3];
        }
        auto a = FindAccount(in_project, id);
        const bool is_default = !a && DefaultAccountProject(absl::AsciiStrToLower(id)).has_value();
        if (!a && !is_default) {
          // Same answer as a denial: a caller learns nothing of accounts it cannot use.
          return refuse(absl::PermissionDeniedError(absl::StrCat(
              "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist): projects/",
              in_project, "/serviceAccounts/", id, ".")));
        }
        const std::string target_email = a ? a->email : absl::AsciiStrToLower(id);
        const std::string target_project = a ? a->project : *DefaultAccountProject(target_email);
        const Resource r = Resource::Account(target_project, target_email);
        if (!iam::Authorize(holder, perm::kServiceAccountsGetAccessToken, r.Name(), ChainOf(r)).ok()) {
          return refuse(absl::PermissionDeniedError(absl::StrCat(
              "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist): ",
              r.Name(), ".", i > 0 ? absl::StrCat(" (", holder.Member(), " is delegates[", i - 1, "].)") : "")));
        }
        holder = Principal::ServiceAccount(target_email);
        email = target_email;
      }
      return Mint(Principal::ServiceAccount(email).Member(), lifetime, "generateAccessToken", done);
    }
  });
}

void IamService::IssueToken(const Principal& principal, absl::Duration lifetime, std::string purpose,
                            Callback<IssuedToken> done, db::Sync sync) {
  Write([this, member = principal.Member(), lifetime, purpose = std::move(purpose), done = std::move(done),
         sync]() -> std::optional<Change> {
    std::shared_lock lock(mu_);
    if (!PrincipalExists(member)) {
      lock.unlock();
      done(absl::NotFoundError(absl::StrCat(member, " does not exist.")));
      return std::nullopt;
    }
    Change change = Mint(member, lifetime, purpose, done);
    change.sync = sync;
    return change;
  });
}

void IamService::RevokeTokens(const std::string& purpose, StatusCallback done) {
  Write([this, purpose, done = std::move(done)]() -> std::optional<Change> {
    std::vector<db::Mutation> writes;
    std::vector<std::string> hashes;
    {
      std::shared_lock lock(mu_);
      for (const auto& [h, t] : tokens_) {
        if (t.purpose == purpose) {
          hashes.push_back(h);
          writes.push_back(Delete(kTokenKind, h));
        }
      }
    }
    return Change{std::move(writes),
                  [this, hashes] {
                    for (const auto& h : hashes) tokens_.erase(h);
                  },
                  done};
  });
}

// ---- users ----

void IamService::CreateUser(const std::string& email_in, Callback<User> done) {
  const std::string email = absl::AsciiStrToLower(email_in);
  if (!ValidEmail(email)) {
    return done(absl::InvalidArgumentError(absl::StrCat("\"", email_in, "\" is not a valid email address.")));
  }
  Write([this, email, done = std::move(done)]() -> std::optional<Change> {
    bool exists;
    {
      std::shared_lock lock(mu_);
      exists = users_.count(email) > 0;
    }
    if (exists) {
      done(absl::AlreadyExistsError(absl::StrCat("User ", email, " already exists.")));
      return std::nullopt;
    }
    User u{email, clock_.Now()};
    return Change{{Put(kUserKind, email, EncodeUser(u))},
                  [this, u] { users_[u.email] = u; },
                  [done, u](absl::Status s) { s.ok() ? done(u) : done(s); }};
  });
}

void IamService::DeleteUser(const std::string& email_in, StatusCallback done) {
  const std::string email = absl::AsciiStrToLower(email_in);
  Write([this, email, done = std::move(done)]() -> std::optional<Change> {
    const std::string member = Principal::User(email).Member();
    std::map<std::string, Policy> changed;
    std::vector<db::Mutation> writes;
    {
      std::shared_lock lock(mu_);
      if (!users_.count(email)) {
        lock.unlock();
        done(absl::NotFoundError(absl::StrCat("User ", email, " does not exist.")));
        return std::nullopt;
      }
      writes = ForgetMember(member, &changed);
    }
    writes.push_back(Delete(kUserKind, email));
    return Change{std::move(writes),
                  [this, email, member, changed = std::move(changed)]() mutable {
                    std::erase_if(tokens_, [&](const auto& kv) { return kv.second.member == member; });
                    for (auto& [name, p] : changed) policies_[name] = std::move(p);
                    users_.erase(email);
                  },
                  done};
  });
}

std::vector<User> IamService::ListUsers() const {
  std::shared_lock lock(mu_);
  std::vector<User> out;
  for (const auto& [email, u] : users_) out.push_back(u);
  return out;
}

// ---- the TPU flow ----

void IamService::GenerateServiceIdentity(const model::Project& project, const std::string& service,
                                         Callback<ServiceAccount> done) {
  if (service != "tpu.googleapis.com") {
    return done(absl::InvalidArgumentError(absl::StrCat(
        "Service ", service, " has no service identity in mlengine: only tpu.googleapis.com (the TPU service "
                             "account of the TPU guide's access steps) does.")));
  }
  Write([this, p = project, done = std::move(done)]() -> std::optional<Change> {
    ServiceAccount a;
    a.project = p.id;
    a.email = p.tpu_service_account;
    a.account_id = a.email.substr(0, a.email.find('@'));
    a.display_name = "Cloud TPU service identity";
    a.service_agent = true;
    std::optional<ServiceAccount> existing;
    {
      std::shared_lock lock(mu_);
      auto it = accounts_.find(a.email);
      if (it != accounts_.end()) existing = it->second;
    }
    if (existing) {  // generated before: the same identity
      done(*existing);
      return std::nullopt;
    }
    a.unique_id = RandomDigits(21);
    a.create_time = clock_.Now();
    return Change{{Put(kAccountKind, a.email, EncodeAccount(a))},
                  [this, a] { accounts_[a.email] = a; },
                  [done, a](absl::Status s) { s.ok() ? done(a) : done(s); }};
  });
}

absl::Status IamService::CheckTpuServiceAgent(const model::Project& project) const {
  const std::string& email = project.tpu_service_account;
  const std::string member = Principal::ServiceAccount(email).Member();
  std::shared_lock lock(mu_);
  const bool exists = accounts_.count(email) > 0;
  auto it = policies_.find(ProjectResource(project.id));
  bool granted = false;
  if (it != policies_.end()) {
    for (const auto& b : it->second.bindings) {
      if (b.role == kServiceAgentRole && std::find(b.members.begin(), b.members.end(), member) != b.members.end()) {
        granted = true;
      }
    }
  }
  if (exists && granted) return absl::OkStatus();
  const std::string grant = absl::StrCat("mlengine projects add-iam-policy-binding ", project.id, " --member=", member,
                                         " --role=", kServiceAgentRole);
  if (!exists) {
    return absl::FailedPreconditionError(absl::StrCat(
        "This job uses TPUs, but project ", project.id, " has not set up its TPU service account ", email,
        " with the role ", kServiceAgentRole, ". Create the identity (POST /v1beta1/projects/", project.number,
        "/services/tpu.googleapis.com:generateServiceIdentity, or: mlengine services identity create "
        "--service=tpu.googleapis.com --project=", project.id, "), then grant the role: ", grant));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "This job uses TPUs, but the project's TPU service account ", email, " does not hold ", kServiceAgentRole,
      " on project ", project.id, ". Grant it: ", grant));
}

absl::Status IamService::CheckActAs(const Principal& who, const model::Project& project,
                                    const std::string& account_in) const {
  const std::string account = absl::AsciiStrToLower(account_in);
  if (account == project.service_account) return absl::OkStatus();
  std::shared_lock lock(mu_);
  auto a = FindAccount("-", account);
  if (!a) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Field: job.training_input.service_account Error: service account ", account_in, " does not exist."));
  }
  const Resource r = Resource::Account(a->project, a->email);
  if (who.IsOperator()) return absl::OkStatus();
  if (iam::Authorize(who, perm::kServiceAccountsActAs, r.Name(), ChainOf(r)).ok()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "Permission 'iam.serviceAccounts.actAs' denied on service account ", a->email, ": ", who.Member(),
      " may not run jobs as it. Its owner grants roles/iam.serviceAccountUser on the account or the project."));
}

// ---- buckets ----

void IamService::SetBucketProject(const std::string& bucket, const std::string& project, StatusCallback done) {
  Write([this, bucket, project, done = std::move(done)]() -> std::optional<Change> {
    return Change{{Put(kBucketKind, bucket, {{"project", project}})},
                  [this, bucket, project] { bucket_owner_[bucket] = project; },
                  done};
  });
}

void IamService::ClearBucketProject(const std::string& bucket, StatusCallback done) {
  Write([this, bucket, done = std::move(done)]() -> std::optional<Change> {
    return Change{{Delete(kBucketKind, bucket)}, [this, bucket] { bucket_owner_.erase(bucket); }, done};
  });
}

std::optional<std::string> IamService::BucketProject(const std::string& bucket) const {
  std::shared_lock lock(mu_);
  auto it = bucket_owner_.find(bucket);
  if (it == bucket_owner_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> IamService::BucketsOf(const std::string& project) const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [b, p] : bucket_owner_) {
    if (p == project) out.push_back(b);
  }
  return out;
}

std::vector<std::string> IamService::OwnedBuckets() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [b, p] : bucket_owner_) out.push_back(b);
  return out;
}

// ---- audit ----

void IamService::Audit(db::AuditRecord record, StatusCallback done) {
  store_.Commit({AuditWrite(std::move(record))}, std::move(done));
}

db::Mutation IamService::AuditWrite(db::AuditRecord record) const {
  if (record.time_us == 0) record.time_us = Micros(clock_.Now());
  return db::AppendAudit{std::move(record)};
}

absl::StatusOr<std::vector<db::AuditRecord>> IamService::ReadAudit(const db::AuditQuery& query) const {
  return store_.ReadAudit(query);
}

}  // namespace mle::iam
