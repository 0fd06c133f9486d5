/* HTTP through libmicrohttpd, one thread per connection: authentication,
 * body limits, routing, and the wait for a job's output. A waiting thread
 * wakes at least every 100 ms to check that its client is still connected
 * (a closed socket reads as end-of-file), and cancels the request when it is
 * not; a streaming client that goes away mid-write ends the same way. */
#include "serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* Per connection request: the body as it arrives. */
typedef struct conn {
  char *body;
  size_t len, cap;
  bool too_large;
  double t0;
} conn;

/* A streaming answer, owned by its libmicrohttpd response. */
typedef struct stream {
  sv_server *s;
  sv_job *job;
  int fd;
  char *out;
  size_t out_len, out_cap, out_off;
  bool done;
} stream;

static bool peer_alive(int fd) {
  if (fd < 0) return true;
  struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
  if (poll(&p, 1, 0) <= 0) return true;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return false;
  if (p.revents & POLLIN) {
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
  }
  return true;
}

static int conn_fd(struct MHD_Connection *mc) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
  return ci ? ci->connect_fd : -1;
}

/* Waits on the job's condition for up to 100 ms (mu held). */
static void wait_a_little(sv_server *s, sv_job *job) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += 100 * 1000 * 1000;
  if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
  pthread_cond_timedwait(&job->cond, &s->mu, &ts);
}

static void count_status(sv_server *s, unsigned status) {
  int k = status < 300    ? 0
          : status == 400 ? 1
          : status == 401 ? 2
          : status == 404 ? 3
          : status == 429 ? 4
                          : 5;
  pthread_mutex_lock(&s->mu);
  s->n_http[k]++;
  pthread_mutex_unlock(&s->mu);
}

/* Queues `text` (malloc'ed; taken) as the answer. */
static enum MHD_Result answer(sv_server *s, struct MHD_Connection *mc, unsigned status,
                              const char *content_type, char *text) {
  if (!text) {
    status = 500;
    content_type = "application/json";
    text = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                  "\"param\":null,\"code\":null}}");
    if (!text) return MHD_NO;
  }
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", content_type);
  if (status == 429) MHD_add_response_header(r, "Retry-After", "1");
  if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
  enum MHD_Result ok = MHD_queue_response(mc, status, r);
  MHD_destroy_response(r);
  count_status(s, status);
  return ok;
}

static enum MHD_Result answer_error(sv_server *s, struct MHD_Connection *mc, const sv_error *e) {
  return answer(s, mc, e->http_status, "application/json", sv_error_json(e));
}

static enum MHD_Result fail(sv_server *s, struct MHD_Connection *mc, unsigned status,
                            const char *code, const char *message, const char *arg) {
  sv_error e;
  sv_fail(&e, status, NULL, "%s%s", message, arg ? arg : "");
  e.code = code;
  return answer_error(s, mc, &e);
}

/* Compares in time that depends only on the key's length, not on where a
 * guess first differs. */
static bool key_matches(const char *key, const char *given) {
  size_t kl = strlen(key), gl = strlen(given);
  unsigned char diff = kl != gl;
  for (size_t i = 0; i < kl; i++)
    diff |= (unsigned char)key[i] ^ (unsigned char)(i < gl ? given[i] : 0);
  return diff == 0;
}

static bool authorized(sv_server *s, struct MHD_Connection *mc) {
  if (!s->cfg.api_key) return true;
  const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
  if (!h || strncasecmp(h, "Bearer ", 7)) return false;
  h += 7;
  while (*h == ' ') h++;
  return key_matches(s->cfg.api_key, h);
}

static char *models_json(sv_server *s, bool one) {
  json_object *m = json_object_new_object();
  json_object_object_add(m, "id", json_object_new_string(s->cfg.model_name));
  json_object_object_add(m, "object", json_object_new_string("model"));
  json_object_object_add(m, "created", json_object_new_int64((int64_t)time(NULL)));
  json_object_object_add(m, "owned_by", json_object_new_string("brisk"));
  json_object_object_add(m, "max_model_len", json_object_new_int(s->cfg.ctx_size));
  json_object *o = m;
  if (!one) {
    o = json_object_new_object();
    json_object *data = json_object_new_array();
    json_object_array_add(data, m);
    json_object_object_add(o, "object", json_object_new_string("list"));
    json_object_object_add(o, "data", data);
  }
  const char *j = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
  char *copy = j ? strdup(j) : NULL;
  json_object_put(o);
  return copy;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  stream *st = cls;
  sv_server *s = st->s;
  for (;;) {
    if (st->out_off < st->out_len) {
      size_t n = st->out_len - st->out_off < max ? st->out_len - st->out_off : max;
      memcpy(buf, st->out + st->out_off, n);
      st->out_off += n;
      return (ssize_t)n;
    }
    if (st->done) return MHD_CONTENT_READER_END_OF_STREAM;
    st->out_len = st->out_off = 0;
    pthread_mutex_lock(&s->mu);
    for (;;) {
      bool done = false;
      if (!sv_stream_chunks(s, st->job, &st->out, &st->out_len, &st->out_cap, &done)) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR;
      }
      st->done = done;
      if (st->out_len || done) break;
      wait_a_little(s, st->job);
      if (!sv_job_finished(st->job) && !peer_alive(st->fd)) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR; /* the free callback cancels */
      }
    }
    pthread_mutex_unlock(&s->mu);
  }
}

static void stream_free(void *cls) {
  stream *st = cls;
  sv_release(st->s, st->job); /* cancels it if the client left early */
  free(st->out);
  free(st);
}

static enum MHD_Result generate(sv_server *s, struct MHD_Connection *mc, sv_kind kind,
                                const conn *c) {
  sv_error e;
  if (kind != SV_EMBEDDING && s->embed_only) {
    sv_fail(&e, 400, NULL,
            "the model is an encoder: it gives embeddings (POST /v1/embeddings), not text");
    return answer_error(s, mc, &e);
  }
  sv_job *job = calloc(1, sizeof *job);
  if (!job) return answer(s, mc, 500, "application/json", NULL);
  if (!sv_parse_request(s, kind, c->body ? c->body : "", c->len, job, &e)) {
    sv_job_clear(job);
    free(job);
    return answer_error(s, mc, &e);
  }
  static unsigned long long counter;
  unsigned long long serial = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
  snprintf(job->id, sizeof job->id, "%s-%llx%06llx",
           kind == SV_CHAT        ? "chatcmpl"
           : kind == SV_EMBEDDING ? "embd"
                                  : "cmpl",
           (unsigned long long)time(NULL), serial);
  int fd = conn_fd(mc);
  if (!sv_submit(s, job, &e)) return answer_error(s, mc, &e); /* job is gone */
  if (job->stream) {
    stream *st = calloc(1, sizeof *st);
    struct MHD_Response *r = st ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                                    stream_read, st, stream_free)
                                : NULL;
    if (!r) {
      free(st);
      sv_release(s, job);
      return answer(s, mc, 500, "application/json", NULL);
    }
    *st = (stream){.s = s, .job = job, .fd = fd};
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(mc, 200, r);
    MHD_destroy_response(r);
    count_status(s, 200);
    return ok;
  }
  char *text = NULL;
  bool gone = false, failed = false;
  pthread_mutex_lock(&s->mu);
  while (!sv_job_finished(job) && !gone) {
    wait_a_little(s, job);
    if (!sv_job_finished(job) && !peer_alive(fd)) gone = true;
  }
  char job_error[256];
  snprintf(job_error, sizeof job_error, "%s", job->error_message);
  if (!gone && !(failed = job->error)) text = sv_response_json(s, job);
  pthread_mutex_unlock(&s->mu);
  sv_release(s, job);
  if (gone) return MHD_NO; /* closes the connection; the request is cancelled */
  if (failed) {
    sv_fail(&e, 500, NULL, "%s failed: %s", kind == SV_EMBEDDING ? "embedding" : "generation",
            job_error[0] ? job_error : "sampling or memory");
    return answer_error(s, mc, &e);
  }
  return answer(s, mc, 200, "application/json", text);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *mc, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls) {
  (void)version;
  sv_server *s = cls;
  conn *c = *con_cls;
  if (!c) {
    if (!(c = calloc(1, sizeof *c))) return MHD_NO;
    c->t0 = sv_now_s();
    *con_cls = c;
    if (strcmp(url, "/health") && !authorized(s, mc)) {
      sv_error e;
      sv_fail(&e, 401, NULL, "Incorrect or missing API key (send 'Authorization: Bearer KEY')");
      e.code = "invalid_api_key";
      return answer_error(s, mc, &e);
    }
    const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > s->cfg.max_body_bytes) c->too_large = true;
    if (c->too_large)
      return fail(s, mc, 413, "request_too_large",
                  "the request body is larger than the server's limit (--max-body)", NULL);
    return MHD_YES;
  }
  if (*upload_size) {
    if (!c->too_large && c->len + *upload_size <= s->cfg.max_body_bytes) {
      if (!sv_buf_append(&c->body, &c->len, &c->cap, upload, *upload_size)) return MHD_NO;
    } else {
      c->too_large = true;
    }
    *upload_size = 0;
    return MHD_YES;
  }
  if (c->too_large)
    return fail(s, mc, 413, "request_too_large",
                "the request body is larger than the server's limit (--max-body)", NULL);
  const bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
  if (!strcmp(url, "/health")) {
    if (!get) return fail(s, mc, 405, NULL, "use GET for /health", NULL);
    bool draining;
    pthread_mutex_lock(&s->mu);
    draining = s->draining;
    pthread_mutex_unlock(&s->mu);
    return answer(s, mc, draining ? 503 : 200, "application/json",
                  strdup(draining ? "{\"status\":\"shutting down\"}" : "{\"status\":\"ok\"}"));
  }
  if (!strcmp(url, "/v1/models")) {
    if (!get) return fail(s, mc, 405, NULL, "use GET for /v1/models", NULL);
    return answer(s, mc, 200, "application/json", models_json(s, false));
  }
  if (!strncmp(url, "/v1/models/", 11)) {
    if (strcmp(url + 11, s->cfg.model_name))
      return fail(s, mc, 404, "model_not_found", "no such model: ", url + 11);
    return answer(s, mc, 200, "application/json", models_json(s, true));
  }
  if (!strcmp(url, "/metrics")) {
    if (!get) return fail(s, mc, 405, NULL, "use GET for /metrics", NULL);
    return answer(s, mc, 200, "text/plain; version=0.0.4", sv_metrics_text(s));
  }
  const bool chat = !strcmp(url, "/v1/chat/completions");
  if (chat || !strcmp(url, "/v1/completions")) {
    if (!post) return fail(s, mc, 405, NULL, "use POST for ", url);
    return generate(s, mc, chat ? SV_CHAT : SV_COMPLETION, c);
  }
  if (!strcmp(url, "/v1/embeddings")) {
    if (!post) return fail(s, mc, 405, NULL, "use POST for ", url);
    return generate(s, mc, SV_EMBEDDING, c);
  }
  return fail(s, mc, 404, NULL, "no route for ", url);
}

static void completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
  sv_server *s = cls;
  conn *c = *con_cls;
  if (!c) return;
  if (s->cfg.log_requests) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_HTTP_STATUS);
    fprintf(stderr, "brisk serve: %u %.1f ms%s\n", ci ? ci->http_status : 0,
            (sv_now_s() - c->t0) * 1e3,
            toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
  }
  free(c->body);
  free(c);
  *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  sv_server *s = cls;
  if (!s->cfg.log_requests) return;
  fputs("brisk serve: http: ", stderr);
  vfprintf(stderr, fmt, ap);
}

struct MHD_Daemon *sv_http_start(sv_server *s, int *bound_port) {
  struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->cfg.port)};
  struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)s->cfg.port)};
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                   MHD_USE_ITC | MHD_USE_ERROR_LOG;
  const struct sockaddr *addr;
  if (inet_pton(AF_INET, s->cfg.host, &a4.sin_addr) == 1) {
    addr = (const struct sockaddr *)&a4;
  } else if (inet_pton(AF_INET6, s->cfg.host, &a6.sin6_addr) == 1) {
    addr = (const struct sockaddr *)&a6;
    flags |= MHD_USE_IPv6;
  } else { /* a name, e.g. localhost: its first address */
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(s->cfg.host, NULL, &hints, &res) || !res) {
      fprintf(stderr, "brisk serve: --host '%s' is neither an address nor a known name\n",
              s->cfg.host);
      return NULL;
    }
    if (res->ai_family == AF_INET6) {
      a6.sin6_addr = ((const struct sockaddr_in6 *)res->ai_addr)->sin6_addr;
      addr = (const struct sockaddr *)&a6;
      flags |= MHD_USE_IPv6;
    } else {
      a4.sin_addr = ((const struct sockaddr_in *)res->ai_addr)->sin_addr;
      addr = (const struct sockaddr *)&a4;
    }
    freeaddrinfo(res);
  }
  errno = 0;
  struct MHD_Daemon *d = MHD_start_daemon(
      flags, (uint16_t)s->cfg.port, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR, addr,
      MHD_OPTION_CONNECTION_LIMIT, s->cfg.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
      s->cfg.idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
      MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
      MHD_OPTION_END);
  if (!d) {
    fprintf(stderr, "brisk serve: cannot listen on %s port %d: %s\n", s->cfg.host, s->cfg.port,
            errno ? strerror(errno) : "the HTTP library refused");
    return NULL;
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  *bound_port = di ? di->port : s->cfg.port;
  return d;
}
