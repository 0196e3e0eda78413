package io.mockdcp;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Typed builders of the common steps. Each returns a {@link Step}; add the other fields of
 * its kind with {@link Step#with}, e.g. {@code Steps.set("k", v).with("collection",
 * "inventory.hotel")}. The vocabulary, every step and field, is in mockdcp's docs/reference/steps.md and
 * {@code mockdcp/scenario/steps.py}; {@link Step#of} makes any step.
 *
 * <pre>{@code
 * server.control().steps(
 *     Steps.pausePersistence(),              // writes stay unpersisted
 *     Steps.generate(100),                   // seeded documents doc::000000...
 *     Steps.waitForConsumer(),               // the consumer has every item
 *     Steps.failover(),                      // lose the unpersisted writes: a new branch
 *     Steps.expectRollback(0, Duration.ofSeconds(10)));
 * }</pre>
 */
public final class Steps {

  private Steps() {}

  /** {@code vbuckets} as the vocabulary takes them: {@code "all"} for none given. */
  private static Object vbuckets(int... vbuckets) {
    return vbuckets.length == 0 ? "all" : Arrays.stream(vbuckets).boxed().toList();
  }

  // ------------------------------------------------------------------------------------ data

  /** Write a document (a mutation): {@code value} a JSON object or list (a Map, a List), or a
   * string stored as is. */
  public static Step set(String key, Object value) {
    return Step.of("set", Map.of("key", key, "value", value));
  }

  /** Delete a live document (a tombstone). */
  public static Step delete(String key) {
    return Step.of("delete", Map.of("key", key));
  }

  /** Expire a live document now, as the expiry pager does. */
  public static Step expire(String key) {
    return Step.of("expire", Map.of("key", key));
  }

  /** {@code docs} seeded Faker documents, keys {@code doc::000000} on. */
  public static Step generate(int docs) {
    return Step.of("generate", Map.of("docs", docs));
  }

  /** {@code docs} seeded Faker documents, keys {@code prefix::NNNNNN} from {@code start} on. */
  public static Step generate(int docs, String prefix, int start) {
    return Step.of("generate", Map.of("docs", docs, "prefix", prefix, "start", start));
  }

  // --------------------------------------------------------------------------------- storage

  /** Close the open checkpoint of these vbuckets (all when none given). */
  public static Step checkpoint(int... vbuckets) {
    return Step.of("checkpoint", Map.of("vbuckets", vbuckets(vbuckets)));
  }

  /** Persist every write of these vbuckets (all when none given). */
  public static Step persist(int... vbuckets) {
    return Step.of("persist", Map.of("vbuckets", vbuckets(vbuckets)));
  }

  /** Persist each vbucket's writes up to seqno {@code upto}. */
  public static Step persistUpTo(long upto) {
    return Step.of("persist", Map.of("upto", upto));
  }

  /** Hold the flusher: later writes stay unpersisted (what a failover loses). */
  public static Step pausePersistence() {
    return Step.of("persistence", Map.of("paused", true));
  }

  /** Release the flusher. */
  public static Step resumePersistence() {
    return Step.of("persistence", Map.of("paused", false));
  }

  /** Purge tombstones of these vbuckets (all when none given). */
  public static Step purge(int... vbuckets) {
    return Step.of("purge", Map.of("vbuckets", vbuckets(vbuckets)));
  }

  /** Drop the streams' cursors: they switch from memory to a disk backfill. */
  public static Step dropCursor(int... vbuckets) {
    return Step.of("drop_cursor", Map.of("vbuckets", vbuckets(vbuckets)));
  }

  /** Restart the node (unpersisted writes lost, connections closed). */
  public static Step restart(int... vbuckets) {
    return Step.of("restart", Map.of("vbuckets", vbuckets(vbuckets)));
  }

  // --------------------------------------------------------------------------------- cluster

  /** Fail over these vbuckets (all when none given), losing their unpersisted writes: a new
   * branch in each failover log; a consumer past it gets ROLLBACK. */
  public static Step failover(int... vbuckets) {
    return Step.of("failover", Map.of("vbuckets", vbuckets(vbuckets)));
  }

  /** Move vbuckets to another node: NOT_MY_VBUCKET and a new cluster map revision. */
  public static Step moveVbucket(int... vbuckets) {
    return Step.of("move_vbucket", Map.of("vbuckets", vbuckets(vbuckets)));
  }

  /** Flush the bucket. */
  public static Step flush() {
    return Step.of("flush", Map.of());
  }

  // ----------------------------------------------------------------------------------- users

  /** Create a local user with {@code roles}, comma separated as ns_server spells them ({@code
   * data_dcp_reader[default]}, {@code admin}), or give an existing one these roles. */
  public static Step createUser(String name, String password, String roles) {
    return Step.of("create_user", Map.of("name", name, "password", password, "roles", roles));
  }

  /** Delete a user: its connections stay, its next login fails. */
  public static Step deleteUser(String name) {
    return Step.of("delete_user", Map.of("name", name));
  }

  /** Give a user more roles. */
  public static Step grant(String user, String roles) {
    return Step.of("grant", Map.of("user", user, "roles", roles));
  }

  /** Take roles from a user: its streams that lose DcpStream end LOST_PRIVILEGES at their next
   * snapshot marker, its DCP connections that lose DcpProducer are closed. */
  public static Step revoke(String user, String roles) {
    return Step.of("revoke", Map.of("user", user, "roles", roles));
  }

  /** Set a user's password: nothing drops, the next login with the old one fails. */
  public static Step changePassword(String user, String password) {
    return Step.of("change_password", Map.of("user", user, "password", password));
  }

  /** Create a scope. */
  public static Step createScope(String name) {
    return Step.of("create_scope", Map.of("name", name));
  }

  /** Drop a scope and every collection in it. */
  public static Step dropScope(String name) {
    return Step.of("drop_scope", Map.of("name", name));
  }

  /** Create {@code scope.name}. */
  public static Step createCollection(String collection) {
    return Step.of("create_collection", Map.of("collection", collection));
  }

  /** Drop {@code scope.name}. */
  public static Step dropCollection(String collection) {
    return Step.of("drop_collection", Map.of("collection", collection));
  }

  /** Make a bucket on every node ({@code with("storage", "magma")}, {@code
   * with("flush_enabled", true)}...); a name deleted before comes back new: new vbucket uuids,
   * seqnos from 0. Any step takes {@code with("bucket", name)} to act on that bucket. */
  public static Step createBucket(String name) {
    return Step.of("create_bucket", Map.of("name", name));
  }

  /** Delete a bucket: every connection to it closes. */
  public static Step deleteBucket(String name) {
    return Step.of("delete_bucket", Map.of("name", name));
  }

  // ---------------------------------------------------------------------------------- faults

  /** Drop the consumers' connections. */
  public static Step disconnect() {
    return Step.of("disconnect", Map.of());
  }

  /** Send nothing for a while. */
  public static Step stall(Duration duration) {
    return Step.of("stall", Map.of("seconds", duration));
  }

  /** End these vbuckets' streams (all when none given) with a STREAM_END reason ({@code ok},
   * {@code state_changed}, {@code too_slow}, ...). */
  public static Step endStream(String reason, int... vbuckets) {
    return Step.of("end_stream", Map.of("reason", reason, "vbuckets", vbuckets(vbuckets)));
  }

  /** Answer the next {@code request} (an opcode name, e.g. {@code dcp_stream_req}) with
   * {@code status} (e.g. {@code etmpfail}). */
  public static Step reject(String request, String status) {
    return Step.of("reject", Map.of("request", request, "status", status));
  }

  // --------------------------------------------------------------------------------- control

  /** Wait a while. */
  public static Step waitFor(Duration duration) {
    return Step.of("wait", Map.of("seconds", duration));
  }

  /** Wait until the consumer has been sent each vbucket's high seqno (60 s at most). */
  public static Step waitForConsumer() {
    return waitForConsumer(Map.of("seqno", "high"));
  }

  /** Wait for consumer progress: {@code seqno}, {@code vbucket}, {@code acked}, {@code
   * connections}, {@code streams}, {@code rollback}, ... (60 s at most; {@code
   * .with("timeout", ...)}). */
  public static Step waitForConsumer(Map<String, ?> progress) {
    return Step.of("wait", Map.of("consumer", progress));
  }

  /** Expect the consumer to take a rollback of {@code vbucket} (ROLLBACK sent and a request at
   * or below its seqno) within {@code within}. */
  public static Step expectRollback(int vbucket, Duration within) {
    return Step.of("expect", Map.of("rollback", Map.of("vbucket", vbucket), "within", within));
  }

  /** Expect the consumer to take a rollback of {@code vbucket} to seqno {@code to} within
   * {@code within}. */
  public static Step expectRollback(int vbucket, long to, Duration within) {
    return Step.of("expect",
        Map.of("rollback", Map.of("vbucket", vbucket, "to", to), "within", within));
  }

  /** Expect the consumer to resume {@code vbucket} from {@code seqno} within {@code within}. */
  public static Step expectResume(int vbucket, long seqno, Duration within) {
    return Step.of("expect",
        Map.of("resume", Map.of("vbucket", vbucket, "seqno", seqno), "within", within));
  }

  /** Name the point the steps have reached (shown in {@code state().scenario().label()}). */
  public static Step label(String name) {
    return Step.of("label", Map.of("name", name));
  }

  /** The steps as a list (for {@link MockDcpControl#steps(List)}). */
  public static List<Step> of(Step... steps) {
    return List.of(steps);
  }
}
