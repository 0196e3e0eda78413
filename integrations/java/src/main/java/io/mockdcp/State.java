package io.mockdcp;

import java.util.List;
import java.util.Map;

/**
 * A snapshot of the node ({@code GET /mock/state}): its connections, streams and per-vbucket
 * seqnos, and the scenario's progress. The parts a test commonly checks; {@link
 * MockDcpControl#stateJson()} has all of it.
 *
 * @param bucket the bucket's name
 * @param numVbuckets its vbuckets
 * @param connections the open KV connections
 * @param streams the streams, per state
 * @param vbuckets each vbucket's state and seqnos
 * @param persistencePaused whether the flusher is held
 * @param scenario the step runner's progress (a scenario's, or the steps posted)
 * @param totals counters since the server started (what {@code /metrics} reports)
 */
public record State(
    String bucket,
    int numVbuckets,
    List<Connection> connections,
    Streams streams,
    List<VBucket> vbuckets,
    Boolean persistencePaused,
    Progress scenario,
    Map<String, Long> totals) {

  /**
   * A KV connection.
   *
   * @param connId the server's number for it
   * @param name its DCP_OPEN name ({@code ""} before it)
   * @param state its state
   * @param bytesSent bytes written to it
   * @param ackedBytes bytes it acknowledged (flow control)
   */
  public record Connection(long connId, String name, String state, long bytesSent,
      long ackedBytes) {}

  /**
   * The streams.
   *
   * @param total how many
   * @param byState how many in each state ({@code pending}, {@code backfilling}, {@code
   *     in_memory}, {@code ending}, {@code dead})
   */
  public record Streams(int total, Map<String, Integer> byState) {}

  /**
   * A vbucket.
   *
   * @param vbucket its number
   * @param state {@code active}, {@code replica}, {@code pending} or {@code dead}
   * @param uuid its current vbucket uuid (the failover log's newest entry)
   * @param highSeqno its high seqno
   * @param persistedSeqno the highest seqno on disk
   * @param sentSeqno the highest seqno a live stream of it has written, or null
   * @param ackedSeqno the highest seqno known to be acknowledged, or null
   */
  public record VBucket(int vbucket, String state, long uuid, long highSeqno,
      long persistedSeqno, Long sentSeqno, Long ackedSeqno) {}

  /**
   * The step runner's progress.
   *
   * @param applied steps applied
   * @param current the step running now, or null
   * @param label the last {@code label} step's name, or null
   * @param expectations the expect steps' outcomes
   * @param failure why the steps stopped, or null
   * @param finished whether every step has run
   */
  public record Progress(int applied, String current, String label,
      List<Expectations.Expectation> expectations, String failure, boolean finished) {}
}
