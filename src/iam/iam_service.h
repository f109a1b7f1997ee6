// IamService: identities, tokens, policies and the audit log of mlengined.
// It keeps every record in memory (read without blocking on disk) and writes
// each change through db::Store before it is visible or answered. Changes
// run one at a time, in order (check, make durable, apply, then the next),
// so a policy's etag check and its update cannot interleave with another
// change; readers never see a change that is not yet durable.
//
// Principals: the operator (mlengined's admin token, every permission),
// users the operator creates, and service accounts of projects: the ones
// callers create (ACCOUNT@PROJECT.iam.mlengine.local), each project's
// default account that jobs run as (service-NUMBER@cloud-ml.mlengine.iam.local)
// and its TPU service identity (service-NUMBER@cloud-tpu.mlengine.iam.local),
// which exists once generateServiceIdentity created it.
//
// Tokens are stored as SHA-256 hashes only, expire, and die with their
// principal. Policies attach to projects, jobs and service accounts; a
// permission holds on a resource when its own policy or its project's grants
// it (iam/authorize.h decides).
//
// Thread-safe: any method from any thread. Callbacks of changes run on the
// store's thread (or the caller's, when refused at once); keep them short.
// Lock order: IamService's lock, then the ProjectDirectory's (it is asked
// while ours is held), so never call IamService holding the directory's.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <map>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "db/change_queue.h"
#include "db/store.h"
#include "iam/authorize.h"
#include "iam/identity.h"
#include "iam/policy.h"
#include "iam/principal.h"
#include "model/project.h"

namespace mle::iam {

// Where IamService finds projects (JobService keeps them).
class ProjectDirectory {
 public:
  virtual ~ProjectDirectory() = default;
  virtual std::optional<model::Project> FindProject(const std::string& id) const = 0;
  virtual std::optional<model::Project> FindProjectByNumber(int64_t number) const = 0;
};

struct AccountPage {
  std::vector<ServiceAccount> accounts;
  std::string next_page_token;
};

class IamService {
 public:
  template <class T>
  using Callback = std::function<void(absl::StatusOr<T>)>;
  using StatusCallback = std::function<void(absl::Status)>;

  // `operator_token`: mlengined's admin token (compared in constant time).
  IamService(db::Store& store, common::Clock& clock, std::string operator_token);
  // Waits for the changes queued and in flight to finish (a change's store
  // callback still runs code of ours after answering its caller). The store
  // must outlive the service.
  ~IamService() = default;

  void AttachProjects(const ProjectDirectory* projects) { projects_ = projects; }

  // Loads every identity record. Call once, before serving.
  absl::Status Recover();

  // ---- who calls, and may they ----
  // The principal a bearer token belongs to; UNAUTHENTICATED (saying why:
  // unknown, expired, its principal deleted) otherwise.
  absl::StatusOr<Principal> Authenticate(absl::string_view token) const;
  absl::Status Authorize(const Principal& who, absl::string_view permission, const Resource& resource) const;

  // ---- policies (getIamPolicy / setIamPolicy / testIamPermissions) ----
  // A project nobody has set a policy on has its initial one: its default
  // account (the one its jobs run as) holds kInitialDefaultAccountRole, so
  // jobs reach their own project's buckets, as AI Platform's service agent
  // did. An owner removes that binding like any other.
  Policy GetPolicy(const Resource& resource) const;
  // `etag`: the one the caller read (nullopt: overwrite, as Google allows);
  // a different current etag is ABORTED. The members must exist; the caller
  // must hold every permission of each role it adds (no escalation).
  void SetPolicy(const Principal& who, const Resource& resource, Policy policy, std::optional<std::string> etag,
                 Callback<Policy> done);
  // The subset of `permissions` `who` holds on the resource; INVALID_ARGUMENT
  // for a permission mlengine does not know.
  absl::StatusOr<std::vector<std::string>> TestPermissions(const Principal& who, const Resource& resource,
                                                           const std::vector<std::string>& permissions) const;

  // ---- service accounts (iam v1) ----
  void CreateServiceAccount(const std::string& project, const std::string& account_id, ServiceAccount fields,
                            Callback<ServiceAccount> done);
  // `id`: the email or the unique id; `project` may be "-" (any project).
  absl::StatusOr<ServiceAccount> GetServiceAccount(const std::string& project, const std::string& id) const;
  absl::StatusOr<AccountPage> ListServiceAccounts(const std::string& project, int page_size,
                                                  const std::string& page_token) const;
  void DeleteServiceAccount(const std::string& project, const std::string& id, StatusCallback done);

  // ---- tokens ----
  // iamcredentials generateAccessToken: a token of `account` for `who`, who
  // must hold iam.serviceAccounts.getAccessToken on it (through `delegates`,
  // each holding it on the next). Lifetime 1 s to 12 h; default 1 h.
  void GenerateAccessToken(const Principal& who, const std::string& project, const std::string& account,
                           const std::vector<std::string>& delegates, absl::Duration lifetime,
                           Callback<IssuedToken> done);
  // A token for the replicas of a job running as `account`, valid for
  // `lifetime` or until RevokeToken.
  // `sync`: kLazy for a token that need not outlive this machine (the
  // replicas of a local job end with it), committed without a disk flush.
  void IssueToken(const Principal& principal, absl::Duration lifetime, std::string purpose,
                  Callback<IssuedToken> done, db::Sync sync = db::Sync::kDurable);
  // Revokes every token issued with `purpose` (a job's, when it ends).
  void RevokeTokens(const std::string& purpose, StatusCallback done);

  // ---- users (the operator's admin API) ----
  void CreateUser(const std::string& email, Callback<User> done);
  void DeleteUser(const std::string& email, StatusCallback done);
  std::vector<User> ListUsers() const;

  // ---- the guide's TPU flow ----
  // serviceusage generateServiceIdentity for tpu.googleapis.com: creates
  // the project's TPU service identity (idempotent) and returns it.
  void GenerateServiceIdentity(const model::Project& project, const std::string& service,
                               Callback<ServiceAccount> done);
  // OK when the project's TPU service identity holds roles/ml.serviceAgent
  // on the project; FAILED_PRECONDITION naming the account, the role and the
  // commands that fix it otherwise.
  absl::Status CheckTpuServiceAgent(const model::Project& project) const;
  // OK when `who` may run a job as `account` of `project`
  // (iam.serviceAccounts.actAs); the project's default account needs no grant.
  absl::Status CheckActAs(const Principal& who, const model::Project& project, const std::string& account) const;

  // ---- buckets belong to projects ----
  void SetBucketProject(const std::string& bucket, const std::string& project, StatusCallback done);
  // Forgets the bucket's owner (the bucket was deleted), so a bucket of the
  // same name created later starts unowned.
  void ClearBucketProject(const std::string& bucket, StatusCallback done);
  // The project that owns the bucket; nullopt for one created before
  // buckets had owners (only the operator reaches those).
  std::optional<std::string> BucketProject(const std::string& bucket) const;
  // The buckets of `project`.
  std::vector<std::string> BucketsOf(const std::string& project) const;
  // Every bucket that belongs to a project.
  std::vector<std::string> OwnedBuckets() const;

  // ---- audit ----
  // Appends a line (time_us 0: now), durably, then calls `done`.
  void Audit(db::AuditRecord record, StatusCallback done);
  // The same line as a write for another's transaction (time_us 0: now): a
  // call whose effect is one commit records itself in that commit.
  db::Mutation AuditWrite(db::AuditRecord record) const;
  absl::StatusOr<std::vector<db::AuditRecord>> ReadAudit(const db::AuditQuery& query) const;

 private:
  struct Token {
    std::string member;
    absl::Time expire_time;
    std::string purpose;
  };

  // A change, prepared under mu_ (shared) from the state at its turn and
  // applied under mu_ (exclusive) once durable (db/change_queue.h).
  using Change = db::ChangeQueue::Change;
  using Prepare = db::ChangeQueue::Prepare;
  // Queues `prepare`; changes run one at a time, each after the last is durable.
  void Write(Prepare prepare) { changes_.Write(std::move(prepare)); }
  PolicyChain ChainOf(const Resource& resource) const;  // mu_ held
  // The initial policy of `project` (see GetPolicy); null when the project
  // is not known. The pointer stays valid while the service lives.
  const Policy* InitialPolicyOf(const std::string& project) const;
  bool PrincipalExists(const std::string& member) const;  // mu_ held
  std::optional<std::string> DefaultAccountProject(const std::string& email) const;
  absl::Status CheckMembersExist(const Policy& policy) const;  // mu_ held
  std::optional<ServiceAccount> FindAccount(const std::string& project, const std::string& id) const;  // mu_ held
  // The records to write (and memory to change) when `member` goes: its
  // tokens and its bindings. mu_ held (shared) while computing.
  std::vector<db::Mutation> ForgetMember(const std::string& member, std::map<std::string, Policy>* changed) const;
  // A new token of `member` (and the removal of expired ones). mu_ held.
  Change Mint(const std::string& member, absl::Duration lifetime, const std::string& purpose,
              Callback<IssuedToken> done);

  db::Store& store_;
  common::Clock& clock_;
  const std::string operator_token_;
  const ProjectDirectory* projects_ = nullptr;

  mutable std::shared_mutex mu_;
  std::map<std::string, User> users_;                // by email
  std::map<std::string, ServiceAccount> accounts_;   // by email
  std::map<std::string, Token> tokens_;              // by hash
  std::map<std::string, Policy> policies_;           // by resource name
  std::map<std::string, std::string> bucket_owner_;  // bucket -> project
  mutable std::mutex initial_mu_;
  mutable std::map<std::string, Policy> initial_policies_;  // by project; guarded by initial_mu_

  // Last: destroyed first, once every queued change has finished.
  db::ChangeQueue changes_{store_, [this](const std::function<void()>& apply) {
                             std::unique_lock lock(mu_);
                             apply();
                           }};
};

}  // namespace mle::iam
