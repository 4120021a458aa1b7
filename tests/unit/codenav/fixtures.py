"""Real-looking source files, one per supported language, for the extraction and resolution tests."""

from __future__ import annotations

PYTHON = '''"""Shapes."""
import math
from .util import helper as h

MAX_SIDES = 12


class Shape(Base):
    sides = 0

    def __init__(self, radius):
        self.radius = radius

    def area(self):
        # helper in a comment, "helper" in a string
        return h(math.pi * self.radius ** 2)


def describe(shape):
    total = shape.area()
    return f"{total}"
'''

GO = """package geometry

import (
\tf "fmt"
\t"example.com/acme/util"
)

const MaxSides = 12

var registry = map[string]Shape{}

type Shape interface {
\tArea() float64
}

type Circle struct {
\tRadius float64
}

type Meters = float64

func (c *Circle) Area() float64 {
\treturn util.Square(c.Radius) * 3.14
}

func Describe(s Shape) string {
\treturn f.Sprintf("%v", s.Area())
}
"""

JAVASCRIPT = """import { helper as h, other } from "./util";
import Default from "../lib/index.js";
const path = require("path");

export const MAX_SIDES = 12;

class Circle extends Shape {
  radius = 1;
  area() {
    return h(Math.PI * this.radius ** 2);
  }
}

function describe(shape) {
  return `${shape.area()}`;
}

const square = (x) => x * x;
module.exports.cube = function (x) { return x * x * x; };
"""

TYPESCRIPT = """import { helper } from "./util";
import type { Options } from "@/config";

export interface Shape {
  area(): number;
  name: string;
}

export type Meters = number;

export enum Color { Red, Green = 2 }

export abstract class Base implements Shape {
  name = "base";
  abstract area(): number;
}

export class Circle extends Base {
  private radius: number = 1;
  area(): number {
    return helper(Math.PI * this.radius ** 2);
  }
}

export function describe(shape: Shape): string {
  return String(shape.area());
}

export const square = (x: number): number => x * x;

namespace Geometry { export const ORIGIN = 0; }
"""

TSX = """import React from "react";
import { Circle } from "./shapes";

interface Props { radius: number }

export function CircleView({ radius }: Props) {
  const circle = new Circle(radius);
  return <div className="circle">{circle.area()}</div>;
}
"""

JAVA = """package com.acme.geometry;

import java.util.List;
import com.acme.util.Helper;

public class Circle extends Shape implements Comparable<Circle> {
    public static final int MAX_SIDES = 12;
    private double radius;

    public Circle(double radius) {
        this.radius = radius;
    }

    @Override
    public double area() {
        // Helper in a comment
        return Helper.square(radius) * Math.PI;
    }

    enum Color { RED, GREEN }

    interface Visitor { void visit(Circle c); }

    record Point(int x, int y) {}
}
"""

C = """#include <stdio.h>
#include "shape.h"

#define MAX_SIDES 12
#define SQUARE(x) ((x) * (x))

typedef unsigned long size_type;

struct circle {
\tdouble radius;
\tstruct circle *next;
\tint (*compare)(const struct circle *a, const struct circle *b);
};

enum color { RED, GREEN };

static int counter = 0;

double area(const struct circle *c);

double area(const struct circle *c)
{
\t/* area of the circle */
\treturn SQUARE(c->radius) * 3.14;
}

static char *describe(struct circle *c)
{
\tcounter++;
\treturn "circle";
}
"""

CPP = """#include <vector>
#include "shape.hpp"

namespace geometry {

class Circle : public Shape {
 public:
  explicit Circle(double radius) : radius_(radius) {}
  double area() const override;
  int sides() const { return 0; }

 private:
  double radius_;
};

double Circle::area() const { return radius_ * radius_ * 3.14; }

struct Point { int x; int y; };

using Meters = double;

}  // namespace geometry

int main() { geometry::Circle c(1.0); return static_cast<int>(c.area()); }
"""

RUST = """use std::collections::HashMap;
use crate::util::{helper, other as o};

pub const MAX_SIDES: u32 = 12;

pub struct Circle {
    pub radius: f64,
}

pub enum Color { Red, Green }

pub trait Shape {
    fn area(&self) -> f64;
}

impl Shape for Circle {
    fn area(&self) -> f64 {
        helper(self.radius * self.radius) * 3.14
    }
}

impl Circle {
    pub fn new(radius: f64) -> Self { Circle { radius } }
}

pub type Meters = f64;

macro_rules! square { ($x:expr) => { $x * $x }; }

mod tests {}

fn describe(c: &Circle) -> String { format!("{}", c.area()) }
"""

RUBY = """require "json"
require_relative "util"

module Geometry
  MAX_SIDES = 12

  class Circle < Shape
    attr_reader :radius

    def initialize(radius)
      @radius = radius
    end

    def area
      # helper in a comment
      Util.helper(radius * radius) * Math::PI
    end

    def self.unit
      new(1)
    end
  end
end

def describe(shape)
  shape.area.to_s
end
"""

CSHARP = """using System;
using Acme.Util;

namespace Acme.Geometry
{
    public interface IShape { double Area(); }

    public enum Color { Red, Green }

    public struct Point { public int X; public int Y; }

    public class Circle : IShape
    {
        public const int MaxSides = 12;
        private double radius;
        public string Name { get; set; }

        public Circle(double radius) { this.radius = radius; }

        public double Area()
        {
            // Helper in a comment
            return Helper.Square(radius) * Math.PI;
        }
    }
}
"""

PHP = """<?php
namespace Acme\\Geometry;

use Acme\\Util\\Helper;
require_once "util.php";

const MAX_SIDES = 12;

interface Shape { public function area(): float; }

trait Named { public $name = "shape"; }

class Circle implements Shape
{
    private $radius;

    public function __construct($radius) { $this->radius = $radius; }

    public function area(): float
    {
        // Helper in a comment
        return Helper::square($this->radius) * M_PI;
    }
}

function describe(Shape $shape): string { return (string) $shape->area(); }
"""

KOTLIN = """package com.acme.geometry

import com.acme.util.Helper
import kotlin.math.PI as Pi

interface Shape {
    fun area(): Double
}

class Circle(val radius: Double) : Shape {
    override fun area(): Double = Helper.square(radius) * Pi
}

object Registry {
    const val MAX_SIDES = 12
}

enum class Color { RED, GREEN }

typealias Meters = Double

fun describe(shape: Shape): String = shape.area().toString()
"""

SOURCES: dict[str, tuple[str, str]] = {
    "python": ("geometry/shapes.py", PYTHON),
    "go": ("geometry/shapes.go", GO),
    "javascript": ("src/shapes.js", JAVASCRIPT),
    "typescript": ("src/shapes.ts", TYPESCRIPT),
    "tsx": ("src/CircleView.tsx", TSX),
    "java": ("src/main/java/com/acme/geometry/Circle.java", JAVA),
    "c": ("src/circle.c", C),
    "cpp": ("src/circle.cpp", CPP),
    "rust": ("src/shapes.rs", RUST),
    "ruby": ("lib/geometry.rb", RUBY),
    "csharp": ("src/Circle.cs", CSHARP),
    "php": ("src/Circle.php", PHP),
    "kotlin": ("src/main/kotlin/Circle.kt", KOTLIN),
}
