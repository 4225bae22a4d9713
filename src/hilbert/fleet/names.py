"""Workers' names: a curated list of mathematicians, handed out one per worker, and finding one again.

Every worker in a run is called by a mathematician's surname, as people say and spell it: its `display`
keeps the accents (Poincaré, Erdős, Noether, Łojasiewicz), its `id` is plain lowercase ASCII for
commands, branches and files (`poincare`, `erdos`, `lojasiewicz`). `allocate` hands out the next names
not yet taken, in list order; past the end of the list the names come round again with a suffix
(`poincare-2`, "Poincaré 2", then `-3`, …). `lookup` finds a worker from what a person types, ignoring
case and accents. The list is data in this module; nothing here touches the network or the disk.

Left out on purpose: "Hilbert" (a worker named like the program, `hilbert stop hilbert`, would confuse)
and "Lie" (in a harness that checks what workers claim). Every surname appears once (one Bernoulli).
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from hilbert.errors import UserError


@dataclass(frozen=True)
class Name:
    """A worker's name: `id` is lowercase ASCII (`[a-z0-9-]+`), `display` is the name as people write it."""

    id: str
    display: str


# Letters that NFKD does not take apart into a base letter and an accent.
_FOLD = str.maketrans(
    {"ł": "l", "ø": "o", "ß": "ss", "æ": "ae", "œ": "oe", "đ": "d", "ð": "d", "þ": "th", "ı": "i", "ħ": "h"}
)
_NOT_ID = re.compile(r"[^a-z0-9]+")


def to_id(text: str) -> str:
    """The plain ASCII id of a name as typed or shown: "Erdős 2" -> "erdos-2", "Łojasiewicz" -> "lojasiewicz".

    Accents go (NFKD), letters NFKD keeps whole are mapped (ł, ø, ß, æ, …), and any run of other
    characters (spaces, apostrophes, hyphens) becomes one "-": "d'Alembert" -> "d-alembert".
    """
    folded = unicodedata.normalize("NFKD", text.lower().translate(_FOLD))
    ascii_only = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return _NOT_ID.sub("-", ascii_only).strip("-")


def allocate(count: int, *, taken: Iterable[str] = ()) -> list[Name]:
    """The next `count` names whose ids are not in `taken`, in list order; past the list, suffixed names."""
    if count < 0:
        raise UserError(f"cannot name {count} workers", hint="ask for zero or more workers")
    used = {to_id(name_id) for name_id in taken}
    fresh = (name for name in _all_names() if name.id not in used)
    return list(itertools.islice(fresh, count))


def lookup(text: str, names: Iterable[Name]) -> Name | None:
    """The first of `names` that `text` names, by id or display, ignoring case, accents and separators.

    "poincare", "Poincaré", "POINCARE" all find Poincaré; "Erdős 2", "erdos-2" and "erdos 2" find Erdős 2.
    """
    wanted = to_id(text)
    if not wanted:
        return None
    candidates = list(names)
    for name in candidates:
        if wanted in (name.id, to_id(name.display)):
            return name
    compact = wanted.replace("-", "")  # "maclane" for Mac Lane, "erdos2" for Erdős 2
    for name in candidates:
        if compact in (name.id.replace("-", ""), to_id(name.display).replace("-", "")):
            return name
    return None


def _all_names() -> Iterator[Name]:
    """The list once as it is, then again and again with suffixes 2, 3, …, without end."""
    yield from NAMES
    for round_ in itertools.count(2):
        for name in NAMES:
            yield Name(id=f"{name.id}-{round_}", display=f"{name.display} {round_}")


# One display name a line, the order in which they are handed out: the best known and easiest to say first.
_DISPLAYS = """
Poincaré
Noether
Erdős
Euler
Gauß
Riemann
Ramanujan
Lovelace
Turing
Galois
Hypatia
Fermat
Cauchy
Gödel
Germain
Kovalevskaya
Newton
Leibniz
Pascal
Descartes
Euclid
Archimedes
Pythagoras
Khwārizmī
Khayyām
Fibonacci
Lagrange
Laplace
Fourier
Legendre
Dedekind
Cantor
Chebyshev
Kolmogorov
Mirzakhani
Uhlenbeck
Daubechies
Hopper
Shannon
von Neumann
Bernoulli
Abel
Jacobi
Dirichlet
Weierstrass
Klein
Minkowski
Hausdorff
Weyl
Banach
Łojasiewicz
Sierpiński
Tarski
Ulam
Pólya
Rényi
Riesz
Fejér
Szegő
Haar
Kőnig
Bolyai
Lobachevsky
Markov
Gelfand
Arnold
Sobolev
Perelman
Gromov
Ladyzhenskaya
Oleinik
Bari
Keldysh
Viazovska
Somerville
Agnesi
Châtelet
Robinson
Cartwright
Taussky
Péter
Morawetz
Johnson
Vaughan
Granville
Browne
Haynes
Easley
West
Goldwasser
Liskov
Tardos
Sós
Lovász
Szemerédi
Turán
Lax
Bott
Babai
Kac
Łukasiewicz
Mandelbrot
Bolzano
Čech
Selberg
Hörmander
Bohr
Ahlfors
Cramer
Kronecker
Artin
Landau
Frege
Hopf
Zorn
Möbius
Kepler
Schwarz
Hölder
Zuse
Scholze
Moufang
Geiringer
Hahn
de Rham
Huygens
Stevin
Brouwer
Dijkstra
Deligne
Monge
Poisson
Liouville
Bézout
d'Alembert
Mersenne
Viète
Ngô
Hermite
Jordan
Picard
Hadamard
Borel
Lebesgue
Cartan
Weil
Serre
Grothendieck
Connes
Villani
Voisin
Vergne
Saint-Raymond
Choquet-Bruhat
Serfaty
Julia
Cardano
Tartaglia
Ferrari
Torricelli
Galileo
Peano
Levi-Civita
Ricci
Fubini
de Finetti
Cesàro
De Giorgi
Carathéodory
Calderón
Peixoto
Ávila
Fonseca
Napier
Taylor
Maclaurin
Bayes
Boole
De Morgan
Babbage
Hamilton
Cayley
Sylvester
Green
Stokes
Maxwell
Venn
Carroll
Hardy
Littlewood
Russell
Ramsey
Nightingale
Atiyah
Penrose
Conway
Wiles
Hodge
Coxeter
Fawcett
Scott
Young
Ayrton
Wrinch
Swirles
Stott
Hudson
McDuff
Kirwan
Tillmann
Clarke
Gibbs
Peirce
Birkhoff
Wiener
Nash
Church
Kleene
Post
Knuth
Tukey
Hamming
Milnor
Smale
Thurston
Mac Lane
Cohen
Langlands
Fields
Halmos
Tao
Bhargava
Blackwell
Banneker
Karp
Cook
Rabin
Hoare
Lamport
Valiant
Tarjan
McCarthy
Curry
Allen
Sammet
Booth
Holberton
Antonelli
Ladd-Franklin
Rees
Wheeler
Blum
Cox
Wahba
Ratner
Vogtmann
Wilkinson
Chudnovsky
Chung
Terng
Rudin
Lehmer
Allotey
Obi
Ahmes
Āryabhaṭa
Brahmagupta
Bhāskara
Mādhava
Pingala
Rao
Mahalanobis
Bose
Harish-Chandra
Varadhan
Venkatesh
Liu Hui
Zu Chongzhi
Yang Hui
Sunzi
Chern
Yau
Hua
Chen
Wu
Zhang
Seki
Kodaira
Itô
Hironaka
Shimura
Taniyama
Oka
Thales
Eratosthenes
Apollonius
Diophantus
Ptolemy
Eudoxus
Zeno
Tūsī
Bīrūnī
Kāshī
Alhazen
Thābit
Copernicus
Taimiņa
"""

# The list as `Name`s, built from the lines above: pure data, nothing read or written.
NAMES: tuple[Name, ...] = tuple(Name(id=to_id(line), display=line) for line in _DISPLAYS.split("\n") if line)
