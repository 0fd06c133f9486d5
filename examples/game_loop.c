/* game_loop: brisk inside a game's frame loop. An SDL2 window renders a
 * small scene at 60 frames a second while a character's reply streams into
 * a speech box, token by token. The engine is ticked once per frame with a
 * per-frame time budget (brisk_engine_params.step_time_budget_us) on the
 * render thread, or (--worker) stepped on a worker thread that hands text
 * to the renderer. Text is drawn with a tiny built-in bitmap font.
 *
 *   game_loop MODEL [--prompt TEXT] [--frames N] [--budget-us U] [--worker]
 *             [--no-generate] [--screenshot FILE.bmp] [--threads N]
 *
 * It prints the reply and one line of frame statistics at the end: frames,
 * tokens, the characters on screen, the frame work time p50/p99 (everything
 * but the wait for the next frame) and the frame interval p50/p99 (start to
 * start: 16.7 ms when every frame fits). --screenshot saves the last frame's pixels
 * (read from the window surface) as a BMP. Without a display, run it under
 * xvfb-run.
 */
#include <brisk.h>

#include <SDL.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { W = 640, H = 360, SCALE = 2, GLYPH_W = 3, GLYPH_H = 5, MAX_TEXT = 4096 };

/* ---- a 3x5 bitmap font: ASCII 32..126, lowercase drawn as uppercase ----- */

/* Each glyph: 15 bits, row-major from the top-left (bit 14). */
static unsigned short glyphs[128];

/* One glyph from 5 rows of 3 pixels, '#' = on. */
static void glyph(char c, const char *r0, const char *r1, const char *r2, const char *r3,
                  const char *r4) {
  const char *rows[5] = {r0, r1, r2, r3, r4};
  unsigned short bits = 0;
  for (int y = 0; y < 5; y++)
    for (int x = 0; x < 3; x++) bits = (unsigned short)(bits << 1 | (rows[y][x] == '#'));
  glyphs[(unsigned char)c] = bits;
}

static void font_init(void) {
  glyph('A', ".#.", "#.#", "###", "#.#", "#.#");
  glyph('B', "##.", "#.#", "##.", "#.#", "##.");
  glyph('C', ".##", "#..", "#..", "#..", ".##");
  glyph('D', "##.", "#.#", "#.#", "#.#", "##.");
  glyph('E', "###", "#..", "##.", "#..", "###");
  glyph('F', "###", "#..", "##.", "#..", "#..");
  glyph('G', ".##", "#..", "#.#", "#.#", ".##");
  glyph('H', "#.#", "#.#", "###", "#.#", "#.#");
  glyph('I', "###", ".#.", ".#.", ".#.", "###");
  glyph('J', "..#", "..#", "..#", "#.#", ".#.");
  glyph('K', "#.#", "#.#", "##.", "#.#", "#.#");
  glyph('L', "#..", "#..", "#..", "#..", "###");
  glyph('M', "#.#", "###", "###", "#.#", "#.#");
  glyph('N', "##.", "#.#", "#.#", "#.#", "#.#");
  glyph('O', ".#.", "#.#", "#.#", "#.#", ".#.");
  glyph('P', "##.", "#.#", "##.", "#..", "#..");
  glyph('Q', ".#.", "#.#", "#.#", "##.", ".##");
  glyph('R', "##.", "#.#", "##.", "#.#", "#.#");
  glyph('S', ".##", "#..", ".#.", "..#", "##.");
  glyph('T', "###", ".#.", ".#.", ".#.", ".#.");
  glyph('U', "#.#", "#.#", "#.#", "#.#", "###");
  glyph('V', "#.#", "#.#", "#.#", "#.#", ".#.");
  glyph('W', "#.#", "#.#", "###", "###", "#.#");
  glyph('X', "#.#", "#.#", ".#.", "#.#", "#.#");
  glyph('Y', "#.#", "#.#", ".#.", ".#.", ".#.");
  glyph('Z', "###", "..#", ".#.", "#..", "###");
  glyph('0', "###", "#.#", "#.#", "#.#", "###");
  glyph('1', ".#.", "##.", ".#.", ".#.", "###");
  glyph('2', "##.", "..#", ".#.", "#..", "###");
  glyph('3', "##.", "..#", ".#.", "..#", "##.");
  glyph('4', "#.#", "#.#", "###", "..#", "..#");
  glyph('5', "###", "#..", "##.", "..#", "##.");
  glyph('6', ".##", "#..", "###", "#.#", "###");
  glyph('7', "###", "..#", ".#.", ".#.", ".#.");
  glyph('8', "###", "#.#", "###", "#.#", "###");
  glyph('9', "###", "#.#", "###", "..#", "##.");
  glyph('.', "...", "...", "...", "...", ".#.");
  glyph(',', "...", "...", "...", ".#.", "#..");
  glyph('!', ".#.", ".#.", ".#.", "...", ".#.");
  glyph('?', "##.", "..#", ".#.", "...", ".#.");
  glyph(':', "...", ".#.", "...", ".#.", "...");
  glyph(';', "...", ".#.", "...", ".#.", "#..");
  glyph('\'', ".#.", ".#.", "...", "...", "...");
  glyph('"', "#.#", "#.#", "...", "...", "...");
  glyph('-', "...", "...", "###", "...", "...");
  glyph('+', "...", ".#.", "###", ".#.", "...");
  glyph('=', "...", "###", "...", "###", "...");
  glyph('(', "..#", ".#.", ".#.", ".#.", "..#");
  glyph(')', "#..", ".#.", ".#.", ".#.", "#..");
  glyph('[', ".##", ".#.", ".#.", ".#.", ".##");
  glyph(']', "##.", ".#.", ".#.", ".#.", "##.");
  glyph('/', "..#", "..#", ".#.", "#..", "#..");
  glyph('\\', "#..", "#..", ".#.", "..#", "..#");
  glyph('<', "..#", ".#.", "#..", ".#.", "..#");
  glyph('>', "#..", ".#.", "..#", ".#.", "#..");
  glyph('*', "#.#", ".#.", "###", ".#.", "#.#");
  glyph('#', "#.#", "###", "#.#", "###", "#.#");
  glyph('_', "...", "...", "...", "...", "###");
  glyph('%', "#.#", "..#", ".#.", "#..", "#.#");
  glyph('&', ".#.", "#.#", ".#.", "#.#", ".##");
  glyph('@', "###", "#.#", "###", "#..", ".##");
  glyph('$', ".##", "##.", ".#.", ".##", "##.");
  glyph('^', ".#.", "#.#", "...", "...", "...");
  glyph('`', "#..", ".#.", "...", "...", "...");
  glyph('|', ".#.", ".#.", ".#.", ".#.", ".#.");
  glyph('~', "...", ".##", "##.", "...", "...");
  glyph('{', ".##", ".#.", "##.", ".#.", ".##");
  glyph('}', "##.", ".#.", ".##", ".#.", "##.");
  for (int c = 'a'; c <= 'z'; c++) glyphs[c] = glyphs[c - 'a' + 'A'];
}

/* ---- drawing on a 32-bit surface ---------------------------------------- */

static void fill(SDL_Surface *s, int x, int y, int w, int h, Uint32 color) {
  SDL_Rect r = {x, y, w, h};
  SDL_FillRect(s, &r, color);
}

/* Draws text wrapped to `cols` columns from (x, y); returns the characters
 * drawn. Bytes outside ASCII (a UTF-8 character's) are drawn as '?', once
 * per character. */
static int draw_text(SDL_Surface *s, int x, int y, int cols, int max_rows, const char *text,
                     size_t n, Uint32 color) {
  const int cw = (GLYPH_W + 1) * SCALE, ch = (GLYPH_H + 2) * SCALE;
  int col = 0, row = 0, drawn = 0;
  for (size_t i = 0; i < n && row < max_rows; i++) {
    unsigned char c = (unsigned char)text[i];
    if (c >= 0x80 && (c & 0xC0) == 0x80) continue; /* a continuation byte */
    if (c == '\n' || col == cols) {
      col = 0;
      row++;
      if (c == '\n' || row >= max_rows) continue;
    }
    unsigned short bits = c >= 0x80 ? glyphs['?'] : c < 128 ? glyphs[c] : 0;
    for (int gy = 0; gy < GLYPH_H; gy++)
      for (int gx = 0; gx < GLYPH_W; gx++)
        if (bits >> (14 - (gy * 3 + gx)) & 1)
          fill(s, x + col * cw + gx * SCALE, y + row * ch + gy * SCALE, SCALE, SCALE, color);
    if (bits) drawn++;
    col++;
  }
  return drawn;
}

/* The scene: a sky that darkens, a ground, a character that bobs, and the
 * speech box with the reply so far. Returns the characters drawn in it. */
static int draw_scene(SDL_Surface *s, int frame, const char *text, size_t n) {
  const SDL_PixelFormat *f = s->format;
  for (int y = 0; y < H - 80; y += 8)
    fill(s, 0, y, W, 8, SDL_MapRGB(f, 40, (Uint8)(90 + y / 4), (Uint8)(160 + y / 6)));
  fill(s, 0, H - 80, W, 80, SDL_MapRGB(f, 50, 120, 60));
  const int bob = (frame / 4) % 8 < 4 ? (frame / 4) % 4 : 4 - (frame / 4) % 4;
  const int cx = 80 + (frame * 2) % (W - 160);
  fill(s, cx, H - 140 - bob, 40, 60, SDL_MapRGB(f, 200, 80, 40));       /* body */
  fill(s, cx + 8, H - 170 - bob, 24, 28, SDL_MapRGB(f, 240, 200, 160)); /* head */
  fill(s, 20, 20, W - 40, 120, SDL_MapRGB(f, 20, 20, 30));              /* the speech box */
  fill(s, 20, 20, W - 40, 2, SDL_MapRGB(f, 200, 200, 80));
  const int cols = (W - 60) / ((GLYPH_W + 1) * SCALE);
  /* White is used for text only, so a screenshot can find it. */
  return draw_text(s, 30, 30, cols, 7, text, n, SDL_MapRGB(f, 255, 255, 255));
}

/* ---- the reply: the engine, on this thread or a worker ------------------- */

typedef struct reply {
  brisk_engine *engine;
  uint64_t id;
  pthread_mutex_t mu; /* text and done, shared with a worker */
  char text[MAX_TEXT];
  size_t len;
  int tokens, done;
  int stop; /* the worker should leave */
} reply;

/* One tick: a step within the engine's time budget, then the events. */
static int tick(reply *r) {
  if (brisk_engine_step(r->engine, NULL) != BRISK_OK) return -1;
  brisk_engine_event ev[16];
  size_t n = 0;
  if (brisk_engine_poll(r->engine, ev, 16, &n) != BRISK_OK) return -1;
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < n; i++) {
    if (ev[i].token >= 0) r->tokens++;
    size_t k = ev[i].text_len < MAX_TEXT - 1 - r->len ? ev[i].text_len : MAX_TEXT - 1 - r->len;
    memcpy(r->text + r->len, ev[i].text, k);
    r->len += k;
    if (ev[i].finished) r->done = 1;
  }
  pthread_mutex_unlock(&r->mu);
  return 0;
}

static void *worker(void *arg) {
  reply *r = arg;
  for (;;) {
    pthread_mutex_lock(&r->mu);
    int leave = r->stop || r->done;
    pthread_mutex_unlock(&r->mu);
    if (leave || tick(r)) break;
  }
  return NULL;
}

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const char *model_path = NULL, *prompt = "Once upon a time", *shot = NULL;
  int frames = 600, use_worker = 0, generate = 1, threads = 1;
  long budget_us = 4000;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--frames") && i + 1 < argc)
      frames = atoi(argv[++i]);
    else if (!strcmp(a, "--prompt") && i + 1 < argc)
      prompt = argv[++i];
    else if (!strcmp(a, "--budget-us") && i + 1 < argc)
      budget_us = atol(argv[++i]);
    else if (!strcmp(a, "--screenshot") && i + 1 < argc)
      shot = argv[++i];
    else if (!strcmp(a, "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(a, "--worker"))
      use_worker = 1;
    else if (!strcmp(a, "--no-generate"))
      generate = 0;
    else if (a[0] != '-' && !model_path)
      model_path = a;
    else {
      fprintf(stderr,
              "usage: %s MODEL [--prompt TEXT] [--frames N] [--budget-us U] [--worker]\n"
              "       [--no-generate] [--screenshot FILE.bmp] [--threads N]\n",
              argv[0]);
      return 2;
    }
  }
  if (!model_path || frames < 1) {
    fprintf(stderr, "game_loop: a model and --frames >= 1 are needed\n");
    return 2;
  }
  font_init();

  /* The model and an engine whose steps fit in a slice of a frame. */
  brisk_model *model = NULL;
  if (brisk_model_load(model_path, NULL, &model) != BRISK_OK) {
    fprintf(stderr, "game_loop: %s\n", brisk_last_error());
    return 1;
  }
  brisk_engine_params ep;
  brisk_engine_params_init(&ep);
  ep.n_threads = threads;
  ep.kv_tokens = 1024;
  ep.max_running = 1;
  ep.step_time_budget_us = use_worker ? 0 : budget_us;
  reply r = {.mu = PTHREAD_MUTEX_INITIALIZER};
  if (brisk_engine_create(model, &ep, &r.engine) != BRISK_OK) {
    fprintf(stderr, "game_loop: %s\n", brisk_last_error());
    return 1;
  }
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  rp.prompt_text = prompt;
  rp.max_tokens = 200;
  if (generate && brisk_engine_submit(r.engine, &rp, &r.id) != BRISK_OK) {
    fprintf(stderr, "game_loop: %s\n", brisk_last_error());
    return 1;
  }
  if (!generate) r.done = 1;

  if (SDL_Init(SDL_INIT_VIDEO) != 0) {
    fprintf(stderr, "game_loop: SDL_Init: %s\n", SDL_GetError());
    return 1;
  }
  SDL_Window *win = SDL_CreateWindow("brisk game loop", SDL_WINDOWPOS_UNDEFINED,
                                     SDL_WINDOWPOS_UNDEFINED, W, H, 0);
  SDL_Surface *screen = win ? SDL_GetWindowSurface(win) : NULL;
  SDL_Surface *canvas = SDL_CreateRGBSurfaceWithFormat(0, W, H, 32, SDL_PIXELFORMAT_ARGB8888);
  if (!screen || !canvas) {
    fprintf(stderr, "game_loop: SDL: %s\n", SDL_GetError());
    return 1;
  }
  pthread_t th;
  int have_worker = generate && use_worker && pthread_create(&th, NULL, worker, &r) == 0;

  uint64_t *work = malloc((size_t)frames * sizeof *work);     /* the frame's own time */
  uint64_t *interval = malloc((size_t)frames * sizeof *work); /* start to next start */
  uint64_t last_start = 0;
  const uint64_t frame_us = 1000000 / 60;
  uint64_t next = now_us();
  int drawn = 0, frame = 0, quit = 0;
  for (; frame < frames && !quit; frame++) {
    const uint64_t t0 = now_us();
    if (frame > 0) interval[frame - 1] = t0 - last_start;
    last_start = t0;
    SDL_Event e;
    while (SDL_PollEvent(&e))
      if (e.type == SDL_QUIT) quit = 1;
    if (generate && !use_worker && !r.done && tick(&r)) break;
    char text[MAX_TEXT];
    pthread_mutex_lock(&r.mu);
    size_t n = r.len;
    memcpy(text, r.text, n);
    pthread_mutex_unlock(&r.mu);
    drawn = draw_scene(canvas, frame, text, n);
    SDL_BlitSurface(canvas, NULL, screen, NULL);
    SDL_UpdateWindowSurface(win);
    work[frame] = now_us() - t0;
    /* Wait for the next frame (the display's vsync, in a real game). */
    next += frame_us;
    const uint64_t t1 = now_us();
    if (t1 < next)
      SDL_Delay((Uint32)((next - t1) / 1000));
    else
      next = t1;
  }
  if (have_worker) {
    pthread_mutex_lock(&r.mu);
    r.stop = 1;
    pthread_mutex_unlock(&r.mu);
    pthread_join(th, NULL);
  }
  if (shot && SDL_SaveBMP(canvas, shot) != 0) {
    fprintf(stderr, "game_loop: saving %s: %s\n", shot, SDL_GetError());
    return 1;
  }
  printf("reply: %.*s\n", (int)r.len, r.text);
  qsort(work, (size_t)frame, sizeof *work, cmp_u64);
  const int n_iv = frame > 1 ? frame - 1 : 1;
  if (frame < 2) interval[0] = 0;
  qsort(interval, (size_t)n_iv, sizeof *interval, cmp_u64);
  const char *mode = !generate ? "idle" : use_worker ? "worker" : "render-thread";
  printf("frames %d tokens %d chars %d work_p50_us %llu work_p99_us %llu frame_p50_us %llu "
         "frame_p99_us %llu mode %s budget_us %ld\n",
         frame, r.tokens, drawn, (unsigned long long)work[frame / 2],
         (unsigned long long)work[frame * 99 / 100], (unsigned long long)interval[n_iv / 2],
         (unsigned long long)interval[n_iv * 99 / 100], mode, use_worker ? 0L : budget_us);
  free(work);
  free(interval);
  SDL_FreeSurface(canvas);
  SDL_DestroyWindow(win);
  SDL_Quit();
  brisk_engine_free(r.engine);
  brisk_model_free(model);
  return 0;
}
