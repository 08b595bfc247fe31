(function () {
'use strict';
const C = {}, N = DATA.n;
for (const [name, col] of Object.entries(DATA.cols)) {
  C[name] = Array.isArray(col) ? col : col.codes.map((c) => col.levels[c]);
}
const PREFIXES = [[1e18, 'E'], [1e15, 'P'], [1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k'], [1, ''],
  [1e-3, 'm'], [1e-6, 'µ'], [1e-9, 'n'], [1e-12, 'p']];
const g3 = (v) => String(Number(v.toPrecision(3)));
function si(v, unit) {
  if (v === null || !isFinite(v)) return '–';
  const r = Math.abs(Number(v.toPrecision(3)));
  for (const [f, p] of PREFIXES) if (r >= f) return g3(v / f) + ' ' + p + unit;
  return g3(v) + ' ' + unit;
}
const pct = (v) => (v === null ? '–' : v.toFixed(1) + ' %');
const count = (n) => n.toLocaleString('en-US');
const predicted = (i) => C.achieved[i] === null && C.attainable[i] !== null;
const FORMAT = {
  index: (i) => String(i + 1),
  int: (i, f) => (C[f][i] === null ? '' : String(C[f][i])),
  share: (i, f) => (C[f][i] === null ? '–' : pct(100 * C[f][i])),
  pct: (i, f) => pct(C[f][i]),
  s: (i, f) => si(C[f][i], 's'),
  achieved: (i, f) => (predicted(i) ? '– (what-if)' : si(C[f][i], 'FLOP/s')),
  attainable: (i, f) => si(C[f][i], 'FLOP/s') + (predicted(i) ? ' predicted' : ''),
  num: (i, f) => (C[f][i] === null ? '–' : g3(C[f][i])),
  text: (i, f) => C[f][i] || '',
};
const CLASS = {index: 'n', int: 'n', share: 'n', pct: 'n', s: 'n', achieved: 'n', attainable: 'n', num: 'n',
  name: 'kname', cfg: 'cfg', note: 'note'};

function row(i) {
  const tr = document.createElement('tr');
  for (const [, field, format] of DATA.table) {
    const td = tr.insertCell();
    if (CLASS[format]) td.className = CLASS[format];
    if (format === 'app' && DATA.appPrefix !== null) {
      const a = document.createElement('a');
      a.href = DATA.appPrefix + encodeURIComponent(C.app[i] + '.html');
      a.textContent = C.app[i];
      td.appendChild(a);
    } else {
      td.textContent = (FORMAT[format] || FORMAT.text)(i, field);
    }
    if (format === 'name') td.title = C.kernel[i];
  }
  return tr;
}

function csvCell(v) {
  if (v === null || v === undefined) return '';
  let s = String(v);
  if (typeof v === 'string' && /^[=+\-@]/.test(s)) s = "'" + s;  // a spreadsheet would run it
  return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}
function csvText() {
  const lines = [DATA.csv.map(([head]) => csvCell(head)).join(',')];
  for (let i = 0; i < N; i++) lines.push(DATA.csv.map(([, f]) => csvCell(f === null ? i + 1 : C[f][i])).join(','));
  return lines.join('\n') + '\n';
}
window.ROOFLINE = {csvText: csvText, columns: C};

const tbody = document.getElementById('rows');
if (tbody) {
  const status = document.getElementById('shown'), more = document.getElementById('more');
  const all = document.getElementById('all'), find = document.getElementById('find');
  const every = Array.from({length: N}, (_, i) => i);
  let order = every, shown = 0, hay = null;
  const show = function (upto) {
    const rows = document.createDocumentFragment();
    for (upto = Math.min(upto, order.length); shown < upto; shown++) rows.appendChild(row(order[shown]));
    tbody.appendChild(rows);
    status.textContent = count(shown) + ' of ' + count(order.length) + (order === every ? '' : ' matching') +
      ' kernels shown';
    more.hidden = all.hidden = shown >= order.length;
  };
  more.addEventListener('click', () => show(shown + DATA.pageRows));
  all.addEventListener('click', () => show(order.length));
  find.addEventListener('input', function () {
    const q = find.value.trim().toLowerCase();
    hay = hay || every.map((i) => [C.kernel[i], C.kernel_short[i], C.app[i], C.bound[i], C.note[i]]
      .join('\n').toLowerCase());
    order = q ? every.filter((i) => hay[i].includes(q)) : every;
    tbody.textContent = '';
    shown = 0;
    show(DATA.pageRows);
  });
  show(DATA.pageRows);
  document.getElementById('csv').addEventListener('click', function () {
    const url = URL.createObjectURL(new Blob([csvText()], {type: 'text/csv;charset=utf-8'}));
    const a = document.createElement('a');
    a.href = url;
    a.download = DATA.csvName;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  });
}

function drawnNote(top, n) {
  if (top >= n) return n === 1 ? 'The kernel is drawn.' : 'All ' + count(n) + ' kernels drawn.';
  return 'Drawn: the top ' + count(top) + ' of ' + count(n) + ' kernels by GPU time; ' + count(n - top) +
    ' hidden. Move the "top N kernels by GPU time" slider to the right to show them.';
}
// A device chart is built from every kernel of its device (the summary's); fit its controls to this
// page's rows: the kernel count in its subtitle, the top-N slider, the app filter's choices.
function narrow(spec, controls) {
  const subtitle = spec.title && spec.title.subtitle;
  if (Array.isArray(subtitle) && subtitle.length) subtitle[0] = controls.count + subtitle[0].slice(subtitle[0].indexOf(';'));
  (spec.params || []).forEach(function (param) {
    if (!param.bind) return;
    if (param.name === 'top_n') { param.value = Math.min(param.value, controls.max); param.bind.max = controls.max; }
    if (param.name === 'app_filter') param.bind.options = controls.apps;
  });
}
// Every chart exports to SVG and PNG from its "..." menu: vega-embed renders the file in the page,
// offline; the editor and source actions would open vega.github.io and are left out.
const ACTIONS = {export: true, source: false, compiled: false, editor: false};
DATA.charts.forEach(function (chart, c) {
  const el = document.getElementById('chart' + c), note = document.getElementById('drawn' + c);
  if (chart.inline) {  // an instruction roofline: its few points are in its spec
    vegaEmbed(el, SPECS[c], {actions: ACTIONS, renderer: 'svg'}).then(function (r) {
      VIEWS[c] = r.view;
      el.setAttribute('data-rendered', 'yes');
    }).catch(function (e) {
      el.setAttribute('data-error', String(e));
      el.textContent = 'Chart could not be drawn: ' + e;
    });
    return;
  }
  if (chart.shared) {  // the summary's chart of this device (assets/charts.js), fitted to this page below
    const shared = window.ROOFLINE_CHARTS && window.ROOFLINE_CHARTS[chart.device];
    if (!shared) {
      el.setAttribute('data-error', 'no shared chart for ' + chart.device);
      el.textContent = 'This chart is written with the summary (assets/charts.js beside it), which was not found: ' +
        'build the summary (snakemake reports/summary.html) and reload this page.';
      return;
    }
    SPECS[c] = JSON.parse(JSON.stringify(shared));
  }
  narrow(SPECS[c], chart.controls);
  const points = [];
  for (let i = 0; i < N; i++) {
    if (C.device[i] !== chart.device || C.rank[i] === null) continue;
    const p = {kid: i};
    for (const f of DATA.fields) p[f] = C[f][i];
    points.push(p);
  }
  SPECS[c].datasets[DATA.dataset] = points;
  vegaEmbed(el, SPECS[c], {actions: ACTIONS, renderer: chart.canvas ? 'canvas' : 'svg'}).then(function (r) {
    VIEWS[c] = r.view;
    el.setAttribute('data-rendered', 'yes');
    note.textContent = drawnNote(r.view.signal('top_n'), points.length);
    r.view.addSignalListener('top_n', (_, top) => { note.textContent = drawnNote(top, points.length); });
  }).catch(function (e) {
    el.setAttribute('data-error', String(e));
    el.textContent = 'Chart could not be drawn: ' + e;
  });
});
})();
